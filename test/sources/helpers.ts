import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openSource, type SourceConfig, type SourceItem } from '../../src/sources/open-source.js';

export const FIXTURES = resolve(dirname(fileURLToPath(import.meta.url)), '../fixtures/sources');

export function fixture(name: string): string {
  return join(FIXTURES, name);
}

export async function collect(cfg: SourceConfig): Promise<SourceItem[]> {
  const out: SourceItem[] = [];
  for await (const item of openSource(cfg)) out.push(item);
  return out;
}

/** Short view of items for assertions: ok → [line, record, data]; reject → [line, record, code, message, raw]. */
export function brief(items: SourceItem[]): unknown[] {
  return items.map((i) =>
    i.ok
      ? { ok: true, line: i.origin.line, record: i.origin.record, data: i.data }
      : { ok: false, line: i.origin.line, record: i.origin.record, code: i.issues[0].code, message: i.issues[0].message, raw: i.raw },
  );
}

/** A temp folder for byte-exact files (BOM, CRLF, …), removed by `cleanup`. */
export function tempDir(): { path: (name: string) => string; write: (name: string, content: string | Buffer) => string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'care-etl-sources-'));
  return {
    path: (name) => join(dir, name),
    write: (name, content) => {
      const p = join(dir, name);
      writeFileSync(p, content);
      return p;
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
