import { LineCounter, parseDocument, type Scalar } from 'yaml';
import { describe, expect, it } from 'vitest';
import { YamlLocator, scalarSourceOffset, toPointer } from '../../src/mapping/yaml-positions.js';

const text = [
  'plain: $date(DOB, "YYYY")', // 1
  'multi: first line', // 2
  '  second line', // 3
  "single: 'it''s $x'", // 4
  'double: "a\\tb \\"q\\" \\u00e9 end"', // 5
  'folded: >-', // 6
  '  one', // 7
  '    indented', // 8
  '  two', // 9
  'literal: |', // 10
  '  { "a": 1,', // 11
  '      "b": [ x ] }', // 12
  '', // 13
  '  tail', // 14
  'list:', // 15
  '  - k: v', // 16
  '  - 1: number key', // 17
].join('\n');

const lc = new LineCounter();
const doc = parseDocument(text, { lineCounter: lc });
const loc = new YamlLocator('t.yaml', text, doc, lc);
const scalar = (key: string) => doc.get(key, true) as Scalar;

/** Every non-blank value character maps onto the same character in the source. */
function expectAligned(key: string) {
  const node = scalar(key);
  const value = String(node.value);
  for (let i = 0; i < value.length; i++) {
    const ch = value[i]!;
    if (/\s/.test(ch)) continue;
    const src = scalarSourceOffset(text, node, i);
    expect(src, `${key}[${i}]`).toBeDefined();
    expect(text[src!], `${key}[${i}] = ${ch}`).toBe(ch);
  }
}

describe('scalarSourceOffset', () => {
  it('maps plain, multi-line plain, single-quoted and folded scalars character by character', () => {
    for (const k of ['plain', 'multi', 'single', 'folded']) expectAligned(k);
  });

  it('maps double-quoted scalars across escapes', () => {
    const node = scalar('double');
    const value = String(node.value); // a<tab>b "q" é end
    expect(value).toBe('a\tb "q" é end');
    const at = (i: number) => loc.locationAt(scalarSourceOffset(text, node, i)!);
    expect(at(value.indexOf('e', 9))).toEqual({ file: 't.yaml', line: 5, column: 28 }); // the `e` of `end`
    expect(at(1)).toEqual({ file: 't.yaml', line: 5, column: 11 }); // \t escape starts at its backslash
    expect(at(value.indexOf('é'))).toEqual({ file: 't.yaml', line: 5, column: 21 }); // \u00e9
  });

  it('maps block literals exactly, whitespace included', () => {
    const node = scalar('literal');
    const value = String(node.value);
    expect(value).toBe('{ "a": 1,\n    "b": [ x ] }\n\ntail\n');
    const at = (i: number) => loc.locationAt(scalarSourceOffset(text, node, i)!);
    expect(at(0)).toEqual({ file: 't.yaml', line: 11, column: 3 });
    expect(at(value.indexOf('x'))).toEqual({ file: 't.yaml', line: 12, column: 14 });
    expect(at(value.indexOf('"b"') - 1)).toEqual({ file: 't.yaml', line: 12, column: 6 }); // nested indentation
    expect(at(value.indexOf('tail'))).toEqual({ file: 't.yaml', line: 14, column: 3 });
  });

  it('clamps offsets past the end to the last character', () => {
    const node = scalar('plain');
    expect(text[scalarSourceOffset(text, node, 999)!]).toBe(')');
  });
});

describe('YamlLocator', () => {
  it('finds nodes by path, map keys compared as text', () => {
    expect(loc.positionOf(['list', 0, 'k'])).toEqual({ file: 't.yaml', line: 16, column: 8 });
    expect(loc.positionOf(['list', 1, '1'])).toEqual({ file: 't.yaml', line: 17, column: 8 });
    expect(loc.keyPositionOf(['list', 1, '1'])).toEqual({ file: 't.yaml', line: 17, column: 5 });
  });

  it('falls back to the closest existing ancestor', () => {
    expect(loc.positionOf(['list', 0, 'missing'])).toEqual({ file: 't.yaml', line: 16, column: 5 });
    expect(loc.positionOf(['list', 7])).toEqual({ file: 't.yaml', line: 16, column: 3 });
  });

  it('combines a path with an offset inside the value', () => {
    expect(loc.positionOf(['plain'], 'plain: $date(DOB'.indexOf('DOB') - 7)).toEqual({ file: 't.yaml', line: 1, column: 14 });
  });

  it('builds JSON pointers', () => {
    expect(toPointer(['resources', 0, 'a/b~c'])).toBe('/resources/0/a~1b~0c');
    expect(toPointer([])).toBe('');
  });
});
