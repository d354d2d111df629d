/**
 * Issue 23 item 1: `decide()` — the one decision the run carries out, `plan` describes and `state check` tallies —
 * as a table: ledger entry × server view × mapped resource × reconcile policy → decision.
 */
import { describe, expect, it } from 'vitest';
import type { Issue } from '../../src/core/issues.js';
import { decide, decideFound, teamUpdate, type Decision, type MappedView, type ServerView } from '../../src/load/decide.js';
import type { ReconcilePolicy } from '../../src/mapping/types.js';
import type { LedgerEntry } from '../../src/state/ledger.js';

const mapped: MappedView = { type: 'Patient', identity: { ok: true, matchValue: 'urn:mrn|1' }, hash: 'H-new', comparable: 'C-new' };
const badRule: Issue[] = [{ severity: 'error', code: 'match-invalid', message: 'match: gave two values' }];
const entry = (e: Partial<LedgerEntry>): LedgerEntry => ({
  mapping: 'patient',
  key: 'k1',
  resourceType: 'Patient',
  status: 'synced',
  serverId: 's1',
  hash: 'H-new',
  updatedAt: '',
  ...e,
});
const copy = (hash: string, id = 's1') => ({ id, versionId: '1', hash });
const dupes: Issue[] = [{ severity: 'error', code: 'duplicate-on-server', message: 'two copies' }];

const cases: [string, LedgerEntry | undefined, ServerView, ReconcilePolicy, Decision][] = [
  ['match rule fails → reject (whatever the ledger says)', entry({}), {}, 'auto', { kind: 'reject', issues: badRule }],
  ['pending intent → defer (reconciled on a fresh listing)', entry({ status: 'pending', serverId: undefined }), {}, 'auto', { kind: 'defer', why: 'pending' }],
  ['synced, same hash, not listed → unchanged', entry({}), {}, 'auto', { kind: 'unchanged', serverId: 's1' }],
  ['synced, same hash, listed equal → unchanged', entry({}), { byId: copy('C-new') }, 'auto', { kind: 'unchanged', serverId: 's1', onServer: copy('C-new') }],
  [
    'synced, same hash, server differs, auto → unchanged with drift',
    entry({}),
    { byId: copy('C-old') },
    'auto',
    { kind: 'unchanged', serverId: 's1', onServer: copy('C-old'), drift: 'differs' },
  ],
  ['synced, same hash, server gone, never → unchanged with drift', entry({}), { byId: null }, 'never', { kind: 'unchanged', serverId: 's1', drift: 'gone' }],
  [
    'synced, same hash, server differs, always → update',
    entry({}),
    { byId: copy('C-old') },
    'always',
    { kind: 'update', serverId: 's1', onServer: copy('C-old') },
  ],
  [
    'synced, same hash, server gone, always → look (gone)',
    entry({}),
    { byId: null },
    'always',
    { kind: 'look', gone: 'Patient/s1 recorded in the state is gone from the server' },
  ],
  ['synced, changed hash, not listed → update', entry({ hash: 'H-old' }), {}, 'auto', { kind: 'update', serverId: 's1' }],
  [
    'synced, changed hash, server gone (a 404) → look (gone)',
    entry({ hash: 'H-old' }),
    { byId: null },
    'auto',
    { kind: 'look', gone: 'Patient/s1 recorded in the state is gone from the server' },
  ],
  ['ended, same hash → update (reactivated)', entry({ endedAt: '2026-01-01' }), {}, 'auto', { kind: 'update', serverId: 's1' }],
  [
    'gone, found once by match → adopt, updated',
    entry({ hash: 'H-old' }),
    { byId: null, matches: { kind: 'one', resource: copy('C-old', 's2') } },
    'auto',
    { kind: 'adopt', resource: copy('C-old', 's2'), update: true },
  ],
  [
    'gone, not found → create again, saying why',
    entry({}),
    { byId: null, matches: { kind: 'none' } },
    'always',
    { kind: 'create', recreate: 'Patient/s1 recorded in the state is gone from the server' },
  ],
  [
    'gone under never → still looked up',
    entry({ hash: 'H-old' }),
    { byId: null },
    'never',
    { kind: 'look', gone: 'Patient/s1 recorded in the state is gone from the server' },
  ],
  ['unknown key, auto → look', undefined, {}, 'auto', { kind: 'look' }],
  ['unknown key, never → create without looking', undefined, { matches: { kind: 'one', resource: copy('C-new') } }, 'never', { kind: 'create', blind: true }],
  [
    'unknown key, found once, equal → adopt, not updated',
    undefined,
    { matches: { kind: 'one', resource: copy('C-new', 's9') } },
    'auto',
    { kind: 'adopt', resource: copy('C-new', 's9'), update: false },
  ],
  ['unknown key, not found → create', undefined, { matches: { kind: 'none' } }, 'always', { kind: 'create' }],
  [
    'unknown key, identical copies → defer until every key is known',
    undefined,
    { matches: { kind: 'ambiguous' } },
    'auto',
    { kind: 'defer', why: 'ambiguous' },
  ],
  [
    'unknown key, two different copies → reject naming them',
    undefined,
    { matches: { kind: 'rejected', issues: dupes } },
    'auto',
    { kind: 'reject', issues: dupes },
  ],
  [
    'rejected entry without id → as an unknown key',
    entry({ status: 'rejected', serverId: undefined }),
    { matches: { kind: 'none' } },
    'auto',
    { kind: 'create' },
  ],
];

describe('decide()', () => {
  it.each(cases)('%s', (_name, e, server, policy, expected) => {
    const m = expected.kind === 'reject' && expected.issues === badRule ? { ...mapped, identity: { ok: false as const, issues: badRule } } : mapped;
    expect(decide(e, server, m, policy)).toEqual(expected);
  });

  it('decideFound settles a deferred key from its candidates alone', () => {
    expect(decideFound({ kind: 'none' }, 'C-new', 'why')).toEqual({ kind: 'create', recreate: 'why' });
    expect(decideFound({ kind: 'one', resource: copy('C-new') }, 'C-new')).toEqual({ kind: 'adopt', resource: copy('C-new'), update: false });
  });
});

describe('teamUpdate()', () => {
  const now = new Date('2026-03-01T00:00:00Z');
  const server = { resourceType: 'CareTeam', participant: [{ member: { reference: 'Practitioner/a' } }, { member: { reference: 'Practitioner/b' } }] };

  it('keeps a dropped participant, ended at the run date, and names it', () => {
    const t = teamUpdate({ resourceType: 'CareTeam', participant: [{ member: { reference: 'Practitioner/a' } }] }, server, now);
    expect(t.endedMembers).toEqual(['Practitioner/b']);
    expect(t.same).toBe(false);
    expect(t.body.participant).toContainEqual({ member: { reference: 'Practitioner/b' }, period: { end: now.toISOString() } });
  });

  it('is the same as the server when nothing was dropped and nothing changed', () => {
    expect(teamUpdate(server, server, now)).toMatchObject({ same: true, endedMembers: [] });
  });
});
