/** Where the state lives (src/state/state-location.ts): flag > CARE_STATE_URL > the mapping's state: > the default file. */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CareEtlError, ExitCode } from '../../src/core/issues.js';
import { redactKnown } from '../../src/core/secret.js';
import { Ledger } from '../../src/state/ledger.js';
import { displayStateLocation, resolveStateLocation } from '../../src/state/state-location.js';

const dir = '/srv/clinic';
const PG = 'postgres://etl:Loc-pw-123@db.internal:5432/care';

describe('resolveStateLocation', () => {
  it('takes --state, then CARE_STATE_URL, then the mapping key, then .care-etl/state.db beside the mapping', () => {
    const env = { CARE_STATE_URL: PG };
    expect(resolveStateLocation({ flag: '/tmp/s.db', env, mappingState: 'x.db', mappingDir: dir })).toBe('/tmp/s.db');
    expect(resolveStateLocation({ env, mappingState: 'x.db', mappingDir: dir })).toBe(PG);
    expect(resolveStateLocation({ env: {}, mappingState: 'x.db', mappingDir: dir })).toBe(join(dir, 'x.db'));
    expect(resolveStateLocation({ env: {}, mappingState: 'postgresql://h/db', mappingDir: dir })).toBe('postgresql://h/db');
    expect(resolveStateLocation({ env: { CARE_STATE_URL: ' ' }, mappingDir: dir })).toBe(join(dir, '.care-etl', 'state.db'));
  });

  it('shows a URL without its password, keeps ?schema=, and registers the password as a secret', () => {
    resolveStateLocation({ flag: PG, mappingDir: dir });
    expect(displayStateLocation(PG)).toBe('postgres://etl@db.internal:5432/care');
    expect(displayStateLocation(`${PG}?schema=care_b`)).toBe('postgres://etl@db.internal:5432/care?schema=care_b');
    expect(redactKnown(`connect to ${PG} failed`)).not.toContain('Loc-pw-123');
    expect(displayStateLocation('/a/state.db')).toBe('/a/state.db');
  });

  it('refuses a schema that is not a plain identifier before connecting (exit 2), the password not shown', () => {
    let err: unknown;
    try {
      Ledger.open(`${PG}?schema=x;drop`);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CareEtlError);
    expect((err as CareEtlError).exitCode).toBe(ExitCode.config);
    expect((err as CareEtlError).message).toMatch(/schema "x;drop" is not a plain PostgreSQL identifier/);
    expect(displayStateLocation(`${PG}?schema=x;drop`)).not.toContain('Loc-pw-123');
  });

  it('registers the password of a URL that does not parse, and names the URL without it (exit 2)', () => {
    const bad = 'postgres://etl:Bad-pw-987@db.internal:port/care';
    resolveStateLocation({ flag: bad, mappingDir: dir });
    expect(redactKnown(`the state at ${bad} is down`)).not.toContain('Bad-pw-987');
    expect(displayStateLocation(bad)).toBe('postgres://etl@db.internal:port/care');
    expect(() => Ledger.open(bad)).toThrow(/State URL postgres:\/\/etl@db.internal:port\/care is not a valid URL/);
  });
});
