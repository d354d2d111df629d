import { afterAll, describe, expect, test } from 'vitest';
import { brief, collect, tempDir } from './helpers.js';

/*
 * Line numbers, record numbers and raw text of rejects, checked against a generator that knows them:
 * tens of thousands of rows (many 64 KiB read chunks) mixing multi-line quoted fields, CRLF/LF/mixed
 * line endings, blank and comment lines, ragged rows and malformed quotes (also back to back). A stray closing
 * quote whose field runs past its line (`"x"y,"p⏎q",w`) costs that line only (a `csv-quote` cut, see
 * csv-quote-guard.ts); the next line is read on its own.
 */

const tmp = tempDir();
afterAll(() => tmp.cleanup());

function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a |= 0;
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Expected {
  ok: boolean;
  line: number;
  record: number;
  data?: Record<string, string>;
  code?: string;
  raw?: string;
}

function generate(seed: number, rows: number, endings: 'lf' | 'crlf' | 'mixed', comments: boolean) {
  const rnd = mulberry32(seed);
  const eol = (): string => (endings === 'lf' ? '\n' : endings === 'crlf' ? '\r\n' : ['\n', '\r\n'][Math.floor(rnd() * 2)]);
  const parts: string[] = [];
  const expected: Expected[] = [];
  let line = 1;
  let rec = 0;
  const put = (text: string, breaks: number): void => {
    parts.push(text);
    line += breaks;
  };
  if (rnd() < 0.5) parts.push('\ufeff');
  put(`id,name,note${eol()}`, 1);
  for (let r = 1; r <= rows; r++) {
    const id = String(r).padStart(6, '0');
    const x = rnd();
    if (x < 0.05) put(eol(), 1);
    else if (comments && x < 0.08) put(`# comment ${id}${eol()}`, 1);
    const last = r === rows && rnd() < 0.5;
    const end = last ? '' : eol();
    const start = line;
    const k = rnd();
    if (k < 0.55) {
      put(`${id},name ${id},note ${id}${end}`, last ? 0 : 1);
      expected.push({ ok: true, line: start, record: ++rec, data: { id, name: `name ${id}`, note: `note ${id}` } });
    } else if (k < 0.67) {
      const n = 1 + Math.floor(rnd() * 3);
      const breaks = Array.from({ length: n }, () => ['\n', '\r\n', eol()][Math.floor(rnd() * 3)]);
      const value = breaks.map((b, i) => `part${i}${b}`).join('') + 'end';
      put(`${id},"${value}",n${end}`, n + (last ? 0 : 1));
      expected.push({ ok: true, line: start, record: ++rec, data: { id, name: value, note: 'n' } });
    } else if (k < 0.74) {
      put(`${id},"say ""hi"", ok",n${end}`, last ? 0 : 1);
      expected.push({ ok: true, line: start, record: ++rec, data: { id, name: 'say "hi", ok', note: 'n' } });
    } else if (k < 0.81) {
      const text = rnd() < 0.5 ? `${id},only two` : `${id},a,b,"c${'\r\n'}d"`;
      put(`${text}${end}`, (text.includes('\r\n') ? 1 : 0) + (last ? 0 : 1));
      expected.push({ ok: false, line: start, record: ++rec, code: 'csv-ragged', raw: text });
    } else if (k < 0.93) {
      const text = `${id},bad "quote" ${id},n`;
      put(`${text}${end}`, last ? 0 : 1);
      expected.push({ ok: false, line: start, record: ++rec, code: 'csv-syntax', raw: text });
    } else if (!last) {
      const br = eol();
      put(`${id},"x"y,"p${br}q",w${end}`, 2);
      expected.push({ ok: false, line: start, record: ++rec, code: 'csv-quote', raw: `${id},"x"y,"p` });
      expected.push({ ok: false, line: start + 1, record: ++rec, code: 'csv-syntax', raw: 'q",w' });
    } else {
      put(`${id},name ${id},note ${id}`, 0);
      expected.push({ ok: true, line: start, record: ++rec, data: { id, name: `name ${id}`, note: `note ${id}` } });
    }
  }
  return { text: parts.join(''), expected };
}

describe('CSV line numbers and rejects against a generator', () => {
  for (const [seed, endings, comments] of [
    [1, 'lf', false],
    [2, 'crlf', false],
    [3, 'mixed', true],
    [4, 'crlf', true],
  ] as const) {
    test(`seed ${seed}, ${endings} line endings${comments ? ', comment lines' : ''}`, async () => {
      const { text, expected } = generate(seed, 30_000, endings, comments);
      const path = tmp.write(`gen-${seed}.csv`, text);
      const items = await collect({ name: 'gen', path, csv: comments ? { comment: '#' } : undefined });
      const got = brief(items).map((i) => {
        const { message: _m, ...rest } = i as { message?: string };
        return rest;
      });
      expect(got.length).toBe(expected.length);
      // compare in slices so a failure shows where it starts
      for (let i = 0; i < expected.length; i += 500) {
        expect(got.slice(i, i + 500)).toEqual(expected.slice(i, i + 500));
      }
    });
  }
});
