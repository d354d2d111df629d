/**
 * The studio's sample of each source: its first `size` records, read once and kept while the file stays the same
 * (same size and modification time) — an edit of the mapping re-runs the map over them without reading the file.
 */
import { stat } from 'node:fs/promises';
import { openSource, type SourceConfig, type SourceItem } from '../sources/open-source.js';
import { sourceColumns, type SourceColumns } from '../sources/source-columns.js';
import { readLookupFile, type LookupFileReader } from '../mapping/lookup-file.js';
import { isIndexedLookup } from '../mapping/types.js';

interface Entry {
  stamp: string;
  items: SourceItem[];
}

export interface SampleCache {
  /** The first `size` records of `source` (readers' rejects included, as a run meets them). */
  sample(source: SourceConfig, size: number): Promise<SourceItem[]>;
  /** Records of a source already sampled (for the resource list), or undefined. */
  sampled(source: SourceConfig, size: number): number | undefined;
  /** The source's columns for the column contract (`sourceColumns`), read again only when the file changed. */
  columns(source: SourceConfig): Promise<SourceColumns | undefined>;
  /** Reads a lookup file, or gives the table read before while the file is the same (in-memory tables only). */
  lookupFile: LookupFileReader;
}

/** Everything that changes what is read: the reader's settings, the sample size. */
function idOf(source: SourceConfig, size: number): string {
  const { path, format, records, csv } = source;
  return JSON.stringify([path, format, records, csv, size]);
}

const stampOf = async (path: string): Promise<string> => {
  const st = await stat(path);
  return `${st.size}:${st.mtimeMs}`;
};

/** One text that changes when any of `paths` changes (size, modification time, there or not). */
export async function filesStamp(paths: readonly string[]): Promise<string> {
  return (await Promise.all(paths.map((p) => stampOf(p).catch(() => '-')))).join('|');
}

export function createSampleCache(): SampleCache {
  const entries = new Map<string, Entry>();
  const columns = new Map<string, { stamp: string; columns: Promise<SourceColumns | undefined> }>();
  const lookups = new Map<string, { stamp: string; result: Awaited<ReturnType<LookupFileReader>> }>();
  return {
    async sample(source, size) {
      const id = idOf(source, size);
      const stamp = await stampOf(source.path);
      const hit = entries.get(id);
      if (hit && hit.stamp === stamp) return hit.items;
      const items: SourceItem[] = [];
      if (size > 0) {
        for await (const item of openSource(source)) {
          items.push(item);
          if (items.length >= size) break;
        }
      }
      entries.set(id, { stamp, items });
      return items;
    },
    sampled(source, size) {
      return entries.get(idOf(source, size))?.items.length;
    },
    async columns(source) {
      const id = idOf(source, 0);
      const stamp = await stampOf(source.path);
      const hit = columns.get(id);
      if (hit && hit.stamp === stamp) return hit.columns;
      const read = sourceColumns(source);
      columns.set(id, { stamp, columns: read });
      return read;
    },
    async lookupFile(spec, opts) {
      const stamp = await stampOf(spec.path).catch(() => undefined);
      if (stamp === undefined) return readLookupFile(spec, opts); // not there: the reader says so
      const id = JSON.stringify([spec, opts.timeoutMs, opts.memoryMaxBytes]);
      const hit = lookups.get(id);
      if (hit && hit.stamp === stamp) return hit.result;
      const result = await readLookupFile(spec, opts);
      // An on-disk index is closed with the mapping that opened it: only tables in memory are kept.
      if (!isIndexedLookup(result.table)) lookups.set(id, { stamp, result });
      return result;
    },
  };
}
