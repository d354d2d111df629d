/**
 * Issue 24 item 3: the pure decision of the check after a phase's creates (src/load/duplicate-check.ts) — which
 * created keys another writer duplicated (both ids), which were answered with an id the listing lacks — and when
 * the check runs at all.
 */
import { describe, expect, it } from 'vitest';
import { checkCreated, CreatedKeys, findingIssue, shouldVerify, type CheckView, type CreatedKey } from '../../src/load/duplicate-check.js';
import { matchRuleOf, ServerIndex, type MatchRule } from '../../src/load/server-index.js';
import type { Resource } from '../../src/api/types.js';
import { compileMapping } from '../../src/mapping/compile-mapping.js';
import { loadMapping } from '../../src/mapping/load-mapping.js';
import { fixture } from '../mapping/helpers.js';
import { allIdentifierValues, contentIdentityOfHash } from '../../src/load/identity.js';

const origin = { source: 'patients', file: 'data/patients.csv', line: 2, record: 1 };
const created = (key: string, serverId: string, matchValue = `mrn|${key}`): CreatedKey => ({ key, serverId, matchValue, origin });

/** A listing as `index` (match value → ids) and a state recording `recorded` ids. */
function view(index: Record<string, string[]>, recorded: string[] = []): CheckView {
  const listed = new Set(Object.values(index).flat());
  return { listed: (id) => listed.has(id), copies: (v) => index[v] ?? [], recorded: (id) => recorded.includes(id) };
}

describe('checkCreated', () => {
  it('one copy per created key: nothing found', () => {
    expect(checkCreated([created('1', 'a'), created('2', 'b')], view({ 'mrn|1': ['a'], 'mrn|2': ['b'] }, ['a', 'b']))).toEqual([]);
  });

  it('another copy no state key holds: a duplicate naming both ids', () => {
    const found = checkCreated([created('1', 'a'), created('2', 'b')], view({ 'mrn|1': ['a', 'x'], 'mrn|2': ['b'] }, ['a', 'b']));
    expect(found).toEqual([{ kind: 'duplicate', created: created('1', 'a'), others: ['x'] }]);
    expect(findingIssue('Patient', found[0]!)).toMatchObject({ severity: 'error', code: 'duplicate-on-server' });
    expect(findingIssue('Patient', found[0]!).message).toMatch(/this run created Patient\/a, the server also holds Patient\/x/);
    expect(findingIssue('Patient', found[0]!).message).toMatch(/use a shared state \(--state postgres:\/\/…\) or a CI concurrency group/);
  });

  it('a copy the state records for another key sharing the match value is that key’s resource, not a duplicate', () => {
    const shared = [created('1', 'a', 'content:h'), created('2', 'b', 'content:h')];
    expect(checkCreated(shared, view({ 'content:h': ['a', 'b'] }, ['a', 'b']))).toEqual([]);
    expect(checkCreated(shared, view({ 'content:h': ['a', 'b', 'c'] }, ['a', 'b'])).map((f) => f.kind)).toEqual(['duplicate', 'duplicate']);
  });

  it('an id the listing lacks: missing (with the unrecorded copies), never also a duplicate', () => {
    const found = checkCreated([created('1', 'ghost'), created('2', 'b')], view({ 'mrn|1': ['h1'], 'mrn|2': ['b'] }, ['ghost', 'b']));
    expect(found).toEqual([{ kind: 'missing', created: created('1', 'ghost'), copies: ['h1'] }]);
    const i = findingIssue('Patient', found[0]!);
    expect(i.code).toBe('created-id-missing');
    expect(i.message).toMatch(/answered the create with Patient\/ghost, which its listing does not hold; the server holds Patient\/h1 matching it/);
  });
});

describe('shouldVerify', () => {
  it('auto: when the phase created something, unless a shared state holds the lease; always: whatever the state; never: never', () => {
    expect(shouldVerify('auto', 3, false)).toBe(true);
    expect(shouldVerify('auto', 0, false)).toBe(false);
    expect(shouldVerify('auto', 3, true)).toBe(false);
    expect(shouldVerify('always', 3, true)).toBe(true);
    expect(shouldVerify('always', 0, false)).toBe(false);
    expect(shouldVerify('never', 3, false)).toBe(false);
  });
});

describe('CreatedKeys', () => {
  it('keeps each created key with its match value under the rule; one the rule cannot read again is counted, not checked', async () => {
    const rule: MatchRule = {
      ofMapped: async (r) => {
        if (r.id === 'bad') throw new Error('no');
        return `mrn|${String((r.identifier as { value: string }[])[0]!.value)}`;
      },
      ofServer: async () => [],
    };
    const keys = new CreatedKeys(rule);
    await keys.add({ key: '1', origin, resource: { resourceType: 'Patient', identifier: [{ value: '1' }] } }, 'a');
    await keys.add({ key: '2', origin, resource: { resourceType: 'Patient', id: 'bad' } }, 'b');
    expect(keys.keys).toEqual([created('1', 'a')]);
    expect(keys.unchecked).toBe(1);
  });
});

describe('the listing the check reads (ServerIndex without hashes, issue 28 item 3)', () => {
  const rule: MatchRule = { ofMapped: async () => 'unused', ofServer: async (r) => allIdentifierValues(r) };
  const patient = (id: string, mrn: string) => ({ resourceType: 'Patient', id, identifier: [{ system: 'mrn', value: mrn }], name: [{ family: 'Lee' }] });

  it('ids and match values are indexed as with hashes; no content identity is kept, and asking for one is a bug, not a miss', async () => {
    const plain = new ServerIndex('Patient', new Map([['patients', rule]]), { hashes: false });
    const hashed = new ServerIndex('Patient', new Map([['patients', rule]]));
    for (const index of [plain, hashed]) {
      await index.add(patient('a', '1'));
      await index.add(patient('x', '1'));
      await index.add(patient('b', '2'));
    }
    expect(plain.lookup('patients', 'mrn|1').map((r) => r.id)).toEqual(['a', 'x']);
    expect(plain.lookup('patients', 'mrn|2').map((r) => r.id)).toEqual(hashed.lookup('patients', 'mrn|2').map((r) => r.id));
    expect(plain.get('b')).toMatchObject({ id: 'b', hash: '' });
    const content = contentIdentityOfHash(hashed.get('b')!.hash);
    expect(hashed.lookup('patients', content).map((r) => r.id)).toEqual(['b']);
    expect(() => plain.lookup('patients', content)).toThrow(/content identity looked up in an index without hashes/);
  });
});

describe('MatchRule.now: the built-in rules without a promise (issue 28 item 3)', () => {
  const ENV = { CARE_BASE_URL: 'https://api.example.test', CARE_API_KEY: 'k', CARE_TENANT_ID: 't' };
  const resources = [
    {},
    { identifier: [{ value: 'x' }, { system: 'urn:clinic:mrn', value: '00123' }, { system: 'urn:npi', value: 7 }] },
    { identifier: [] },
    { subject: { reference: 'Patient/p1' }, participant: [{ member: { reference: 'Practitioner/b' } }, { member: { reference: 'Practitioner/a' } }] },
    { subject: { reference: 'Patient/p1' } },
    { resourceType: 'Patient', name: [{ family: 'Lee' }] },
  ] as unknown as Resource[];

  it('gives what the rule gives through the mapping (identifier, references); a JSONata `match:` has none', async () => {
    const compiled = compileMapping(await loadMapping(fixture('valid.yaml'), { env: ENV }));
    const kinds: string[] = [];
    for (const res of compiled.resources.values()) {
      const rule = matchRuleOf(res);
      kinds.push(`${res.def.name}:${rule.now ? 'now' : 'async'}`);
      if (!rule.now) continue;
      for (const r of resources) {
        expect(rule.now.ofMapped(r)).toBe(await rule.ofMapped(r));
        expect(rule.now.ofServer(r)).toEqual(await rule.ofServer(r));
      }
    }
    expect(kinds).toEqual(['patient:now', 'practitioner:async', 'careteam:now']);
  });
});
