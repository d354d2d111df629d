import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { afterAll, describe, expect, test } from 'vitest';
import { openSource } from '../../src/sources/open-source.js';
import { tempDir } from './helpers.js';

/*
 * Streaming: a 200k-row export is read with bounded buffering. The file is written through a FIFO by
 * a writer that honours backpressure, so the writer can only be ahead of the reader by what the
 * pipe and the stream buffers hold — if the reader slurped the file, the writer would finish first.
 * (Counts and byte bounds only: no timing assertions.)
 */

const tmp = tempDir();
afterAll(() => tmp.cleanup());

const ROWS = 200_000;

function row(i: number): string {
  const id = String(i).padStart(8, '0');
  return `${id},First${i},Last${i},1980-01-${String((i % 28) + 1).padStart(2, '0')},"${i} Main St, Apt ${i % 50}",0${i % 10_000}\n`;
}
const HEADER = 'MRN,first_name,last_name,dob,address,zip\n';

describe('CSV streaming', () => {
  test.skipIf(process.platform === 'win32')('a 200k-row CSV arrives record by record while it is still being written', async () => {
    const fifo = tmp.path('export.csv');
    execFileSync('mkfifo', [fifo]);
    let written = 0;
    let finished = false;
    let totalBytes = 0;
    for (let i = 1; i <= ROWS; i++) totalBytes += Buffer.byteLength(row(i));
    const writing = (async () => {
      const out = createWriteStream(fifo);
      out.write(HEADER);
      written += HEADER.length;
      let batch = '';
      for (let i = 1; i <= ROWS; i++) {
        batch += row(i);
        if (i % 500 === 0 || i === ROWS) {
          written += Buffer.byteLength(batch);
          const more = out.write(batch);
          batch = '';
          if (!more) await once(out, 'drain');
        }
      }
      out.end();
      await once(out, 'finish');
      finished = true;
    })();

    let count = 0;
    let consumed = HEADER.length;
    let maxAhead = 0;
    let finishedAtFirst: boolean | undefined;
    for await (const item of openSource({ name: 'patients', path: fifo, format: 'csv' })) {
      count++;
      if (!item.ok) throw new Error(`unexpected reject at record ${item.origin.record}`);
      if (count === 1) finishedAtFirst = finished;
      consumed += Buffer.byteLength(row(count));
      maxAhead = Math.max(maxAhead, written - consumed);
      if (count === ROWS) {
        expect(item.origin).toEqual({ source: 'patients', file: fifo, line: ROWS + 1, record: ROWS });
        expect(item.data.MRN).toBe(String(ROWS).padStart(8, '0'));
        expect(item.data.zip).toBe(`0${ROWS % 10_000}`);
      }
    }
    await writing;
    expect(count).toBe(ROWS);
    expect(totalBytes).toBeGreaterThan(12 * 1024 * 1024);
    expect(finishedAtFirst).toBe(false);
    // The writer was never more than a few buffers (pipe, read stream, parser, 500-row batches) ahead.
    expect(maxAhead).toBeLessThan(4 * 1024 * 1024);
  });

  test('a 200k-row regular file: every record, in order, with its line', async () => {
    const parts = [HEADER];
    for (let i = 1; i <= ROWS; i++) parts.push(row(i));
    const path = tmp.write('big.csv', parts.join(''));
    let count = 0;
    let lineOk = true;
    for await (const item of openSource({ name: 'patients', path })) {
      count++;
      if (!item.ok || item.origin.line !== count + 1 || item.origin.record !== count) lineOk = false;
    }
    expect(count).toBe(ROWS);
    expect(lineOk).toBe(true);
  });
});
