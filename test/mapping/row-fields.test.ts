import jsonata from 'jsonata';
import { describe, expect, it } from 'vitest';
import { rowFieldReads } from '../../src/mapping/row-fields.js';

/** The row fields `expr` reads, as `NAME@offset`, the offset checked against the source text. */
function reads(expr: string): string[] {
  const { reads } = rowFieldReads(expr, jsonata(expr).ast());
  return reads.map((r) => {
    const at = expr.slice(r.offset);
    expect(at.startsWith(r.name) || at.startsWith(`\`${r.name}\``), `${r.name} at ${r.offset} in ${expr}`).toBe(true);
    return r.name;
  });
}

describe('rowFieldReads: the fields an expression reads from its row', () => {
  it('a plain name, a name in a function call, `$.` and `$$.` at top level', () => {
    expect(reads('LAST')).toEqual(['LAST']);
    expect(reads('$trim(LASTNAME)')).toEqual(['LASTNAME']);
    expect(reads('$.LAST')).toEqual(['LAST']);
    expect(reads('$$.LAST')).toEqual(['LAST']);
    expect(reads('$lookup($gender, SEX)')).toEqual(['SEX']);
    expect(reads('LAST ~> $trim()')).toEqual(['LAST']);
  });

  it('only the first step of a path', () => {
    expect(reads('a.b.c')).toEqual(['a']);
    expect(reads('name.given[0]')).toEqual(['name']);
  });

  it('not the names inside a predicate relative to an earlier step', () => {
    expect(reads('identifier[system="x"].value')).toEqual(['identifier']);
    expect(reads('telecom[value].{ "system": system }')).toEqual(['telecom']);
  });

  it('names inside predicates of the row itself (`$[…]`) and after `$[0]` (a group of rows)', () => {
    expect(reads('$[0].MRN')).toEqual(['MRN']);
    expect(reads('$[STATUS = "x"].MRN')).toEqual(['STATUS', 'MRN']);
    expect(reads('$.{ "role": ROLE, "npi": NPI }')).toEqual(['ROLE', 'NPI']);
  });

  it('object constructors: values, not keys', () => {
    expect(reads('{ "family": LAST, KEYNAME: FIRST }')).toEqual(['LAST', 'FIRST']);
  });

  it('conditions, blocks, arrays, operators', () => {
    expect(reads('A ? B : C')).toEqual(['A', 'B', 'C']);
    expect(reads('($x := A; $x & B)')).toEqual(['A', 'B']);
    expect(reads('[A, -B, C in ["x"], D & "y"]')).toEqual(['A', 'B', 'C', 'D']);
    expect(reads('STATUS != "deleted" ? { "x": X }')).toEqual(['STATUS', 'X']);
  });

  it('not variables, function names, nor paths that start from a variable', () => {
    expect(reads('$x')).toEqual([]);
    expect(reads('$x.B')).toEqual([]);
    expect(reads('$now()')).toEqual([]);
    expect(reads('$config.system')).toEqual([]);
  });

  it('not lambda bodies (their context is not known to be the row), but their arguments at the call', () => {
    expect(reads('$map(arr, function($v){ $v.x })')).toEqual(['arr']);
    expect(reads('($strip := function($s) { $trim(Y) }; $strip(Z))')).toEqual(['Z']);
  });

  it('`$$` is the record everywhere, also where the context is something else', () => {
    expect(reads('items.{ "mrn": $$.MRN, "v": value }')).toEqual(['items', 'MRN']);
    expect(reads('$map(arr, function($v){ $$.ROOT })')).toEqual(['arr', 'ROOT']);
  });

  it('not steps after a step that changed the context', () => {
    expect(reads('(A).B')).toEqual(['A']);
    expect(reads('A.$string()')).toEqual(['A']);
    expect(reads('A^(B)')).toEqual(['A']);
    expect(reads('A{B: C}')).toEqual(['A']);
    expect(reads('*.A')).toEqual([]);
    expect(reads('**.A')).toEqual([]);
  });

  it('not inside a transform', () => {
    expect(reads('$ ~> |a|{"b": C}|')).toEqual([]);
  });

  it('backquoted names, with spaces, at the offset of the backquote', () => {
    const expr = '$trim(`First Name`) & " " & `Last-Name`';
    const { reads: r } = rowFieldReads(expr, jsonata(expr).ast());
    expect(r).toEqual([
      { name: 'First Name', offset: 6 },
      { name: 'Last-Name', offset: 28 },
    ]);
  });

  it('offsets inside a multi-line map', () => {
    const expr = '{\n  "family": $name(LASTNAME),\n  "given": [FIRST]\n}';
    const { reads: r } = rowFieldReads(expr, jsonata(expr).ast());
    expect(r).toEqual([
      { name: 'LASTNAME', offset: expr.indexOf('LASTNAME') },
      { name: 'FIRST', offset: expr.indexOf('FIRST') },
    ]);
  });

  it('`$exists(FIELD)` marks FIELD as guarded (the read is still listed)', () => {
    const expr = '$exists(deceasedDateTime) or $exists($.alive) ? deceasedDateTime : X';
    const { reads: r, existsGuarded } = rowFieldReads(expr, jsonata(expr).ast());
    expect([...existsGuarded].sort()).toEqual(['alive', 'deceasedDateTime']);
    expect(r.map((x) => x.name)).toEqual(['deceasedDateTime', 'alive', 'deceasedDateTime', 'X']);
  });

  it('a `$exists` inside a predicate does not guard a row field', () => {
    const expr = 'extension[$exists(valueString)].url';
    const { reads: r, existsGuarded } = rowFieldReads(expr, jsonata(expr).ast());
    expect(r.map((x) => x.name)).toEqual(['extension']);
    expect(existsGuarded.size).toBe(0);
  });
});
