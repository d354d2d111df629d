/**
 * The studio's sample of each source: its first `size` records, read once and kept while the file stays the same
 * (same size and modification time) — an edit of the mapping re-runs the map over them without reading the file.
 */
import { stat } from 'node:fs/promises';
import { openSource, type SourceConfig, type SourceItem } from '../sources/open-source.js';

interface Entry {
  stamp: string;
  items: SourceItem[];
}

export interface SampleCache {
  /** The first `size` records of `source` (readers' rejects included, as a run meets them). */
  sample(source: SourceConfig, size: number): Promise<SourceItem[]>;
  /** Records of a source already sampled (for the resource list), or undefined. */
  sampled(source: SourceConfig, size: number): number | undefined;
}

/** Everything that changes what is read: the reader's settings, the sample size. */
function idOf(source: SourceConfig, size: number): string {
  const { path, format, records, csv } = source;
  return JSON.stringify([path, format, records, csv, size]);
}

export function createSampleCache(): SampleCache {
  const entries = new Map<string, Entry>();
  return {
    async sample(source, size) {
      const id = idOf(source, size);
      const st = await stat(source.path);
      const stamp = `${st.size}:${st.mtimeMs}`;
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
  };
}
