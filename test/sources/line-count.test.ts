/**
 * Issue 28 item 1: a source's lines, counted ahead of its reading (how many rows a phase has left, for its
 * verification listing's start): at least the records; nothing for what lines cannot tell or must not be read twice.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { countSourceLines } from '../../src/sources/line-count.js';

const dir = mkdtempSync(join(tmpdir(), 'care-etl-lines-'));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return { name, path };
};

describe('countSourceLines', () => {
  it('CSV and NDJSON: the lines, a last one without a newline included; a quoted line break counts (high, never low)', async () => {
    expect(await countSourceLines(file('a.csv', 'ID,NAME\n1,a\n2,b\n'))).toBe(3);
    expect(await countSourceLines(file('b.csv', 'ID,NAME\n1,a\n2,b'))).toBe(3);
    expect(await countSourceLines(file('c.csv', 'ID,NOTE\n1,"two\nlines"\n'))).toBe(3);
    expect(await countSourceLines(file('d.ndjson', '{"a":1}\n{"a":2}\n'))).toBe(2);
    expect(await countSourceLines(file('e.csv', ''))).toBe(0);
  });

  it('CR-only and CRLF line breaks (the CSV reader accepts both): each a line, a CRLF once', async () => {
    expect(await countSourceLines(file('cr.csv', 'ID,NAME\r1,a\r2,b\r'))).toBe(3);
    expect(await countSourceLines(file('cr-open.csv', 'ID,NAME\r1,a\r2,b'))).toBe(3);
    expect(await countSourceLines(file('crlf.csv', 'ID,NAME\r\n1,a\r\n2,b\r\n'))).toBe(3);
    // a CRLF split by the 1 MiB reads: its CR the last byte of the first read
    const head = 'x'.repeat((1 << 20) - 1) + '\r';
    expect(await countSourceLines(file('crlf-split.csv', `${head}\n1\r\n2\r\n`))).toBe(3);
  });

  it('across the 1 MiB reads', async () => {
    const rows = 'x'.repeat(99) + '\n';
    expect(await countSourceLines(file('big.csv', rows.repeat(30_000)))).toBe(30_000);
  });

  it('a JSON document, a FIFO, a file above the bound: unknown', async () => {
    expect(await countSourceLines(file('f.json', '[\n{"a":1},\n{"a":2}\n]\n'))).toBeUndefined();
    expect(await countSourceLines(file('g.csv', 'ID\n1\n2\n'), 4)).toBeUndefined();
    const fifo = join(dir, 'h.csv');
    execFileSync('mkfifo', [fifo]);
    expect(await countSourceLines({ name: 'h', path: fifo })).toBeUndefined();
  });
});
