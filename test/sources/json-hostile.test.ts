/**
 * The JSON reader on hostile input (part Q, session 31): stream-json's parser packed a string, key or number whole and
 * built every level of nesting before the record bounds could reject the element — memory grew with the input
 * (a 100 MB string: 312 MB; a million levels: 200 MB). Now a value longer than the text bound is dropped as it is
 * read (json-token-bounds.ts) and its element rejected with the words it had, and a document nested deeper than
 * 65,536 levels is a fatal error. A 100 MiB string is read through a FIFO by a child with a 64 MB heap.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { CareEtlError } from '../../src/core/issues.js';
import { JSON_MAX_DOCUMENT_DEPTH } from '../../src/sources/json-token-bounds.js';
import { brief, collect, tempDir } from './helpers.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const tmp = tempDir();
afterAll(() => tmp.cleanup());

/** `[{"id":1,"note":"<MIB MiB>"},{"id":2}]` (or the long text as a key / a number) through a FIFO, read by the built reader. */
const CHILD = `
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
const { openSource } = await import(${JSON.stringify(pathToFileURL(join(ROOT, 'dist/sources/open-source.js')).href)});
const [dir, mib, kind] = process.argv.slice(1);
const fifo = join(dir, kind + '.json');
execFileSync('mkfifo', [fifo]);
const [open, fill, close] = { string: ['[{"id":1,"note":"', 0x78, '"},{"id":2}]'], key: ['[{"id":1,"', 0x6b, '":1},{"id":2}]'], number: ['[{"id":1,"n":', 0x39, '},{"id":2}]'] }[kind];
const writing = (async () => {
  const out = createWriteStream(fifo);
  out.write(open);
  const chunk = Buffer.alloc(1024 * 1024, fill);
  for (let i = 0; i < Number(mib); i++) if (!out.write(chunk)) await once(out, 'drain');
  out.end(close);
  await once(out, 'finish');
})();
const items = [];
for await (const it of openSource({ name: 's', path: fifo, format: 'json' })) items.push(it.ok ? { record: it.origin.record, data: it.data } : { record: it.origin.record, message: it.issues[0].message, raw: it.raw });
await writing;
console.log(JSON.stringify(items));
`;

function readInChild(kind: string): unknown {
  if (!existsSync(join(ROOT, 'dist/sources/open-source.js'))) throw new Error('dist/ is missing: run `npm run build` first');
  const r = spawnSync(process.execPath, ['--max-old-space-size=64', '--input-type=module', '-e', CHILD, tmp.path(''), '100', kind], { encoding: 'utf8' });
  expect(r.stderr).toBe('');
  return JSON.parse(r.stdout);
}

describe('JSON on hostile input', () => {
  it.skipIf(process.platform === 'win32')('a 100 MiB text value, key or number: its element is a reject, in bounded memory, and reading goes on', () => {
    const next = { record: 2, data: { id: 2 } };
    for (const [kind, what] of [
      ['string', 'a text value is longer than 4194304 characters'],
      ['key', 'a key is longer than 4194304 characters'],
      ['number', 'a number is longer than 4194304 characters'],
    ]) {
      expect(readInChild(kind), kind).toEqual([{ record: 1, message: `element 0 of the records array is too large: ${what}` }, next]);
    }
  });

  it('an element nested 10,000 levels deep is a reject; the next element is read', async () => {
    const path = tmp.write('deep.json', `[{"a":${'['.repeat(10_000)}${']'.repeat(10_000)}},{"b":1}]`);
    const items = brief(await collect({ name: 's', path }));
    expect(items).toMatchObject([
      { ok: false, record: 1, code: 'value-too-large', message: 'element 0 of the records array is too large: nested deeper than 64 levels' },
      { ok: true, record: 2, data: { b: 1 } },
    ]);
  });

  it(`a document nested deeper than ${JSON_MAX_DOCUMENT_DEPTH} levels is a fatal error naming the record it stopped at`, async () => {
    const depth = JSON_MAX_DOCUMENT_DEPTH + 10;
    const path = tmp.write('deeper.json', `[{"ok":1},{"a":${'['.repeat(depth)}${']'.repeat(depth)}}]`);
    const err = await collect({ name: 's', path }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CareEtlError);
    expect((err as CareEtlError).message).toBe(
      `Source \`s\`: ${path}: the document is nested deeper than ${JSON_MAX_DOCUMENT_DEPTH} levels (after record 1): not an array of records`,
    );
  });
});
