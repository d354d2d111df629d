import type { ExportProgress } from './observation-exporter.js';

export interface ExportProgressOptions {
  /** One line rewritten in place on a TTY; plain lines otherwise. */
  tty: boolean;
  write: (text: string) => void;
  /** Plain mode: at most one line this often (default 2 s). TTY mode: at most 10 updates/s. */
  intervalMs?: number;
  clock?: () => number;
  /** TTY mode: fits the line to the terminal's width (so rewriting it in place never adds a line). */
  fit?: (line: string) => string;
}

const n = (x: number) => x.toLocaleString('en-US');
const line = (p: ExportProgress) =>
  `exporting: ${n(p.pages)} pages · ${n(p.scanned)} observations read · ${p.spooled !== undefined ? `${n(p.spooled)} spooled for the wide layout · ` : ''}${n(p.rows)} rows written`;

/** Progress of an export on stderr: only counts, never row contents. */
export function createExportProgress(opts: ExportProgressOptions): { onProgress: (p: ExportProgress) => void; stop: () => void } {
  const clock = opts.clock ?? Date.now;
  const interval = opts.tty ? 100 : (opts.intervalMs ?? 2000);
  let last = 0;
  let drawn = false;
  let latest: ExportProgress | undefined;
  const fitted = (p: ExportProgress) => (opts.fit ? opts.fit(line(p)) : line(p));
  return {
    onProgress(p) {
      latest = p;
      const t = clock();
      if (t - last < interval) return;
      last = t;
      if (opts.tty) {
        opts.write(`\r\x1b[K${fitted(p)}`);
        drawn = true;
      } else opts.write(`${line(p)}\n`);
    },
    stop() {
      if (opts.tty && drawn && latest) opts.write(`\r\x1b[K${fitted(latest)}\n`);
    },
  };
}
