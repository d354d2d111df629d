/** Issue 24 item 5: the digest forms of a match value kept in the state, and how a stored one is read back. */
import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CareEtlError } from '../../src/core/issues.js';
import { redactKnown, Secret, stateSecretFromEnv } from '../../src/core/secret.js';
import { matchDigestFor, MatchDigest } from '../../src/load/match-digest.js';
import { ServerIndex, type MatchRule } from '../../src/load/server-index.js';

const A = new MatchDigest(new Secret('a'.repeat(32)));
const B = new MatchDigest(new Secret('b'.repeat(32)));
const NONE = new MatchDigest();

describe('match digests', () => {
  it('keyed under the secret (its key id in the digest), unkeyed without one; equal only for equal values', () => {
    const v = 'Quixotely|1980-01-02';
    expect(A.of(v)).toMatch(/^h1:[0-9a-f]{8}:[0-9a-f]{64}$/);
    expect(NONE.of(v)).toMatch(/^s1:[0-9a-f]{64}$/);
    expect(A.of(v)).toBe(A.of(v));
    expect(A.of(v)).not.toBe(A.of('Quixotely|1980-01-03'));
    expect(A.of(v)).not.toBe(B.of(v));
    expect(A.of(v).slice(0, 11)).not.toBe(B.of(v).slice(0, 11)); // another key id
    expect(A.of(v)).not.toContain('Quixotely');
  });

  it('keeps the digest format existing states hold: <id>:<hex> over the domain-separated value', () => {
    const v = 'Quixotely|1980-01-02';
    const key = 'a'.repeat(32);
    const keyId = createHmac('sha256', key).update('care-etl/state-secret-id').digest('hex').slice(0, 8);
    expect(A.of(v)).toBe(`h1:${keyId}:${createHmac('sha256', key).update(`care-etl/match/v1\u0000${v}`).digest('hex')}`);
    expect(NONE.of(v)).toBe(`s1:${createHash('sha256').update(`care-etl/match/v1\u0000${v}`).digest('hex')}`);
    expect(A.reading(NONE.of(v))).toMatchObject({ kind: 'digest', scheme: { id: 's1' } });
  });

  it('reads back: its own and unkeyed digests are computable, another secret is foreign, anything else is a clear value', () => {
    const v = 'urn:mrn|000123';
    expect(A.reading(A.of(v))).toMatchObject({ kind: 'digest', scheme: A });
    expect(A.reading(NONE.of(v))).toMatchObject({ kind: 'digest' });
    expect(A.reading(B.of(v))).toEqual({ kind: 'foreign' });
    expect(NONE.reading(A.of(v))).toEqual({ kind: 'foreign' });
    expect(A.reading(v)).toEqual({ kind: 'clear' });
    expect(A.reading('h1:zz:00')).toEqual({ kind: 'clear' });
  });

  it('the server index answers by digest, under the scheme asked for', async () => {
    const rule: MatchRule = { ofMapped: async () => '', ofServer: async (r) => [`${(r.name as { family: string }[])[0]!.family}|${r.birthDate}`] };
    const index = new ServerIndex('Patient', new Map([['patient', rule]]));
    await index.add({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Quixotely' }], birthDate: '1980-01-02' });
    await index.add({ resourceType: 'Patient', id: 'p2', name: [{ family: 'Panzabrook' }], birthDate: '1975-11-23' });
    expect(index.lookupDigest('patient', A.of('Quixotely|1980-01-02'), A).map((r) => r.id)).toEqual(['p1']);
    expect(index.lookupDigest('patient', NONE.of('Panzabrook|1975-11-23'), NONE).map((r) => r.id)).toEqual(['p2']);
    expect(index.lookupDigest('patient', B.of('Quixotely|1980-01-02'), A)).toEqual([]);
  });

  it('CARE_STATE_SECRET: registered for redaction when read; required (≥ 16 characters) for a shared state', () => {
    const secret = 'state-secret-under-test-0123456789';
    expect(stateSecretFromEnv({ CARE_STATE_SECRET: `  ${secret}\n` })?.reveal()).toBe(secret);
    expect(redactKnown(`echoed ${secret}`)).toBe('echoed [redacted]');
    expect(String(stateSecretFromEnv({ CARE_STATE_SECRET: secret }))).toBe('[redacted]');
    expect(stateSecretFromEnv({ CARE_STATE_SECRET: '  ' })).toBeUndefined();
    expect(matchDigestFor({ sharedState: false }).keyed).toBe(false);
    expect(matchDigestFor({ secret: new Secret(secret), sharedState: true }).keyed).toBe(true);
    for (const secretOrNone of [undefined, new Secret('fifteen-chars!!')]) {
      const err = (() => {
        try {
          return matchDigestFor({ secret: secretOrNone, sharedState: true });
        } catch (e) {
          return e;
        }
      })() as CareEtlError;
      expect(err).toBeInstanceOf(CareEtlError);
      expect(err.exitCode).toBe(2);
      expect(err.hint).toContain('openssl rand -hex 32');
      expect(err.message).not.toContain('fifteen-chars!!');
    }
  });
});
