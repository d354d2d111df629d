import { describe, expect, it } from 'vitest';
import { dependencyOrder } from '../../src/mapping/dependency-order.js';

const n = (name: string, ...refs: string[]) => ({ name, refs });

describe('dependencyOrder', () => {
  it('keeps file order when there are no references', () => {
    const r = dependencyOrder([n('b'), n('a'), n('c')]);
    expect(r.order).toEqual(['b', 'a', 'c']);
    expect(r.issues).toEqual([]);
  });

  it('puts a mapping after the ones it refers to, ties in file order', () => {
    const r = dependencyOrder([n('careteam', 'patient', 'practitioner'), n('patient'), n('note', 'patient'), n('practitioner')]);
    expect(r.order).toEqual(['patient', 'note', 'practitioner', 'careteam']);
    expect(r.issues).toEqual([]);
  });

  it('handles chains and repeated refs', () => {
    const r = dependencyOrder([n('c', 'b', 'b'), n('b', 'a'), n('a')]);
    expect(r.order).toEqual(['a', 'b', 'c']);
  });

  it('reports a two-member cycle once, naming every member', () => {
    const r = dependencyOrder([n('patient', 'careteam'), n('careteam', 'patient'), n('practitioner')]);
    expect(r.order).toEqual(['practitioner']);
    expect(r.issues).toHaveLength(1);
    expect(r.issues[0]!.code).toBe('ref-cycle');
    expect(r.issues[0]!.message).toContain('patient → careteam → patient');
    expect(r.cycles).toEqual([['patient', 'careteam', 'patient']]);
  });

  it('reports a self-reference', () => {
    const r = dependencyOrder([n('a', 'a')]);
    expect(r.order).toEqual([]);
    expect(r.issues[0]!.message).toContain('a → a');
  });

  it('walks a longer cycle through all members, and leaves out what depends on it', () => {
    const r = dependencyOrder([n('x', 'a'), n('a', 'b'), n('b', 'c'), n('c', 'a'), n('free')]);
    expect(r.order).toEqual(['free']);
    expect(r.issues).toHaveLength(1);
    expect(r.issues[0]!.message).toContain('a → b → c → a');
  });

  it('reports separate cycles separately', () => {
    const r = dependencyOrder([n('a', 'b'), n('b', 'a'), n('c', 'd'), n('d', 'c')]);
    expect(r.issues.map((i) => i.message)).toEqual([expect.stringContaining('a → b → a'), expect.stringContaining('c → d → c')]);
  });

  it('names every member of a component that is not one simple cycle', () => {
    // a ↔ b and a ↔ c: no simple cycle holds a, b and c
    const r = dependencyOrder([n('a', 'b', 'c'), n('b', 'a'), n('c', 'a')]);
    expect(r.issues).toHaveLength(1);
    const msg = r.issues[0]!.message;
    for (const name of ['a', 'b', 'c']) expect(msg).toContain(name);
  });

  it('reports an unknown reference naming both sides, and still orders the rest', () => {
    const r = dependencyOrder([n('careteam', 'patient', 'practitionr'), n('patient'), n('practitioner')]);
    // the unknown edge is ignored for ordering: careteam only waits for patient
    expect(r.order).toEqual(['patient', 'careteam', 'practitioner']);
    expect(r.issues).toHaveLength(1);
    expect(r.issues[0]).toMatchObject({ code: 'ref-unknown', severity: 'error' });
    expect(r.issues[0]!.message).toContain('`careteam`');
    expect(r.issues[0]!.message).toContain('`practitionr`');
  });

  it('reports duplicate names', () => {
    const r = dependencyOrder([n('a'), n('a')]);
    expect(r.issues[0]!.code).toBe('duplicate-name');
    expect(r.order).toEqual(['a']);
  });
});
