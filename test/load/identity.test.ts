import { describe, expect, it } from 'vitest';
import {
  allIdentifierValues,
  careTeamIdentity,
  comparable,
  comparableHash,
  contentAndComparableHash,
  contentIdentity,
  referenceKey,
} from '../../src/load/identity.js';
import { contentHash } from '../../src/core/content-hash.js';
import fc from 'fast-check';

describe('comparable / comparableHash', () => {
  const mapped = { resourceType: 'Patient', identifier: [{ system: 's', value: '1' }], name: [{ family: 'Lee', given: ['Ann'] }], active: true };

  it('ignores id, meta, nulls the server fills in, empty containers and key order', () => {
    const server = {
      meta: { versionId: '3', lastUpdated: '2026-01-01T00:00:00Z', source: 'x' },
      active: true,
      name: [{ given: ['Ann'], family: 'Lee', prefix: null, use: null }],
      id: 'abc',
      telecom: null,
      address: [],
      extension: [{}],
      identifier: [{ value: '1', system: 's' }],
      resourceType: 'Patient',
    };
    expect(comparable(server)).toEqual(mapped);
    expect(comparableHash(server)).toBe(comparableHash(mapped));
  });

  it('tells real differences apart: a value, an extra field, array order, false vs absent', () => {
    const h = comparableHash(mapped);
    expect(comparableHash({ ...mapped, name: [{ family: 'Lee', given: ['Anne'] }] })).not.toBe(h);
    expect(comparableHash({ ...mapped, gender: 'female' })).not.toBe(h);
    expect(
      comparableHash({
        ...mapped,
        identifier: [
          { system: 's', value: '1' },
          { system: 't', value: '2' },
        ],
      }),
    ).not.toBe(
      comparableHash({
        ...mapped,
        identifier: [
          { system: 't', value: '2' },
          { system: 's', value: '1' },
        ],
      }),
    );
    expect(comparableHash({ ...mapped, active: false })).not.toBe(h);
    expect(contentIdentity(mapped)).toBe(`content:${h}`);
  });
});

describe('contentAndComparableHash (one hash per mapped row)', () => {
  // The oracle: the two hashes computed separately, on resources prune leaves alone and on ones it changes.
  const cases: [string, unknown][] = [
    ['a pruned mapping output', { resourceType: 'Patient', identifier: [{ system: 's', value: '1' }], active: false, n: 0, name: [{ given: ['Ann'] }] }],
    ['id and meta present', { id: 'x', meta: { versionId: '1' }, resourceType: 'Patient', active: true }],
    ['a null member', { resourceType: 'Patient', gender: null, active: true }],
    ['a blank string', { resourceType: 'Patient', name: [{ family: '  ' }], active: true }],
    ['an empty array', { resourceType: 'Patient', telecom: [], active: true }],
    ['an empty object in an array', { resourceType: 'Patient', address: [{}], active: true }],
    ['an undefined array item', { resourceType: 'Patient', name: [{ given: ['A', undefined] }] }],
    ['a sparse array', { resourceType: 'Patient', name: [{ given: ['A', , 'B'] }] }], // eslint-disable-line no-sparse-arrays
    ['a non-finite number', { resourceType: 'Patient', x: Number.NaN, active: true }],
    ['a Date', { resourceType: 'Patient', when: new Date(0) }],
    ['a function', { resourceType: 'Patient', f: () => 1, active: true }],
    ['an own __proto__ key (JSON)', JSON.parse('{"resourceType":"Patient","__proto__":{"a":1},"active":true}')],
  ];
  it.each(cases)('%s: the two hashes as computed separately', (_, r) => {
    expect(contentAndComparableHash(r)).toEqual({ hash: contentHash(r), comparable: comparableHash(r) });
  });
});

describe('comparableHash of any JSON (a server listing: hashed without the pruned copy when nothing is pruned)', () => {
  const json = fc.jsonValue({ maxDepth: 4 }).map((v) => (v && typeof v === 'object' && !Array.isArray(v) ? { id: 'x', meta: { versionId: '1' }, ...v } : v));
  it('is the hash of `comparable` (its definition)', () => {
    fc.assert(
      fc.property(json, (v) => {
        expect(comparableHash(v)).toBe(contentHash(comparable(v)));
      }),
      { numRuns: 1000 },
    );
  });
});

describe('referenceKey', () => {
  it.each([
    ['Patient/123', 'Patient/123'],
    ['https://care.example.org/api/v1/Patient/123', 'Patient/123'],
    ['Patient/123/_history/2', 'Patient/123'],
    ['https://h/Practitioner/a-b.c?x=1#y', 'Practitioner/a-b.c'],
  ])('%s → %s', (ref, key) => expect(referenceKey(ref)).toBe(key));
  it('nothing for nothing', () => {
    expect(referenceKey(undefined)).toBeUndefined();
    expect(referenceKey('')).toBeUndefined();
    expect(referenceKey(42)).toBeUndefined();
  });
});

describe('careTeamIdentity (the `references` rule)', () => {
  const team = (subject: string, ...members: string[]) => ({
    resourceType: 'CareTeam',
    subject: { reference: subject },
    participant: members.map((m) => ({ member: { reference: m }, role: [{ coding: [{ system: null, code: null, display: 'x' }] }] })),
  });
  it('subject + sorted distinct members; role, period and status do not matter', () => {
    expect(careTeamIdentity(team('Patient/p1', 'Practitioner/b', 'Practitioner/a', 'Practitioner/b'))).toBe(
      'subject=Patient/p1;members=Practitioner/a,Practitioner/b',
    );
    expect(careTeamIdentity({ ...team('Patient/p1', 'Practitioner/a'), status: 'active', period: { start: '2025-01-01' } })).toBe(
      careTeamIdentity(team('https://h/Patient/p1', 'Practitioner/a')),
    );
  });
  it('two practitioners of one patient are two identities; no subject → none', () => {
    expect(careTeamIdentity(team('Patient/p1', 'Practitioner/a'))).not.toBe(careTeamIdentity(team('Patient/p1', 'Practitioner/b')));
    expect(careTeamIdentity({ resourceType: 'CareTeam', participant: [] })).toBeUndefined();
  });
});

describe('allIdentifierValues (server side of `identifier`)', () => {
  it('every system|value the server carries, numbers as text, incomplete ones skipped', () => {
    expect(
      allIdentifierValues({
        identifier: [{ system: 'platform', value: 'x1' }, { system: 'urn:mrn', value: 7 }, { value: 'no-system' }, { system: 's', value: null }, null],
      }),
    ).toEqual(['platform|x1', 'urn:mrn|7']);
    expect(allIdentifierValues({})).toEqual([]);
  });
});
