import type { ByteProgress, MappingCounts, RunEvent } from '../pipeline/run-report.js';
import { describeReject } from '../pipeline/rejects.js';
import type { IndexBuild } from '../load/server-index.js';
import { LiveArea, colourOn, painter, terminalWidth, wrapLines, type TermStream } from './terminal.js';
import { barLine, type BarState } from './terminal-bars.js';

/**
 * One line per server listing: when, why and what it cost (pages), so the price of a lost state is visible. `verify`:
 * the listing after a phase's creates (`--verify-after-load`), which looks for another writer's copies.
 */
export function describeIndex(phase: 'start' | 'end', b: IndexBuild, purpose?: 'verify'): string {
  const tag = purpose === 'verify' ? '[verify]' : '[index]';
  if (phase === 'start')
    return purpose === 'verify'
      ? `${tag} listing ${b.resourceType} again: ${b.reason}`
      : `${tag} listing ${b.resourceType} on the server to find resources the state does not know: ${b.reason}`;
  const size = b.pageSize ? `_count=${b.pageSize}` : "the server's page size";
  return `${tag} ${b.resourceType}: ${b.resources} resource(s) in ${b.pages} page(s) (${size}), ${(b.durationMs / 1000).toFixed(1)} s`;
}

const UNITS: readonly [number, string][] = [
  [1e9, 'GB'],
  [1e6, 'MB'],
  [1e3, 'kB'],
];

/** `n` bytes in the unit that suits `scale` (default `n`), SI: `12.3 MB`, `512 B`. */
export function formatBytes(n: number, scale = n): string {
  for (const [size, unit] of UNITS) if (scale >= size) return `${(n / size).toFixed(1)} ${unit}`;
  return `${Math.round(n)} B`;
}

/** A remaining time, coarse as an ETA should be: `< 1 s`, `45 s`, `1 min 20 s`, `2 min`, `1 h 05 min`. */
export function formatDuration(ms: number): string {
  if (!(ms >= 1000)) return '< 1 s';
  const total = Math.ceil(ms / 1000);
  if (total < 60) return `${total} s`;
  if (total < 3600) {
    const m = Math.floor(total / 60);
    const sec = total % 60;
    return sec ? `${m} min ${sec} s` : `${m} min`;
  }
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  return `${h} h ${String(m).padStart(2, '0')} min`;
}

/**
 * The time left to read a source, from the bytes read so far: the rate is measured from the first sample (the
 * first chunk is read before any row is handed out, so it would flatter the rate), over at least `minElapsedMs`
 * of reading before an ETA is given. One per phase (a phase reads one source). The clock is injected.
 */
export class ByteEta {
  #start?: { t: number; read: number };
  constructor(
    private readonly now: () => number = Date.now,
    private readonly minElapsedMs = 1000,
  ) {}

  /** Milliseconds left, or undefined while unknown (no size, too early, nothing read since the first sample, done). */
  update(b: ByteProgress): number | undefined {
    const t = this.now();
    if (!this.#start) {
      this.#start = { t, read: b.read };
      return undefined;
    }
    if (b.total === undefined || b.read >= b.total) return undefined;
    const elapsed = t - this.#start.t;
    const done = b.read - this.#start.read;
    if (elapsed < this.minElapsedMs || done <= 0) return undefined;
    return ((b.total - b.read) * elapsed) / done;
  }
}

/** `12.3 MB / 48.0 MB (25 %) · ETA 1 min 20 s` — or `12.3 MB read` when the size is not known (a FIFO). */
export function describeBytes(b: ByteProgress, etaMs?: number): string {
  if (b.total === undefined) return `${formatBytes(b.read)} read`;
  const pct = b.total > 0 ? Math.min(100, Math.floor((b.read / b.total) * 100)) : 100;
  return `${formatBytes(b.read, b.total)} / ${formatBytes(b.total)} (${pct} %)${etaMs !== undefined ? ` · ETA ${formatDuration(etaMs)}` : ''}`;
}

export interface ProgressOptions {
  /** A progress bar per mapping on a TTY, plain lines otherwise. */
  tty: boolean;
  write: (line: string) => void;
  /** Plain mode: at most one progress line per mapping this often. */
  intervalMs?: number;
  /** Rejects echoed to the terminal before "… more in the rejects file". */
  maxRejectLines?: number;
  /** Clock (ms) for the ETA and the line interval (tests). */
  now?: () => number;
  /** Server listings (`[index]` lines): `run` shows them under `--verbose` only; default shown. */
  showIndexes?: boolean;
  /** The TTY the bars are drawn on (default stderr): its width and colour. */
  stream?: TermStream;
}

const targetLine = (e: Extract<RunEvent, { type: 'target' }>) =>
  `${e.embedded ? 'No target configured: loading into the embedded sandbox' : 'Loading into'} ${e.baseUrl} (tenant ${e.tenantId}${e.dataFile ? `, data in ${e.dataFile}` : ''})`;

const summary = (c: MappingCounts) =>
  `read ${c.read}${c.skipped ? ` · skipped ${c.skipped}` : ''}${c.notSelected ? ` · not selected ${c.notSelected}` : ''} · created ${c.created} · updated ${c.updated} · unchanged ${c.unchanged}${c.adopted ? ` · adopted ${c.adopted}` : ''} · rejected ${c.rejected}${c.ended ? ` · ended ${c.ended}` : ''}${c.written ? ` · written ${c.written}` : ''}`;

/**
 * Turns pipeline events into terminal output (stderr). Only locations, keys and counts are printed, never row
 * contents (patient data stays in the 0600 rejects file).
 */
export async function createRunProgress(opts: ProgressOptions): Promise<RunProgress> {
  const maxRejects = opts.maxRejectLines ?? 20;
  let rejectLines = 0;
  let hiddenRejects = 0;
  const reject = (line: string, log: (s: string) => void) => {
    if (rejectLines < maxRejects) {
      rejectLines++;
      log(`  rejected ${line}`);
    } else hiddenRejects++;
  };
  const finish = (log: (s: string) => void) => {
    if (hiddenRejects) log(`  … and ${hiddenRejects} more rejected rows (see the rejects file)`);
  };
  const now = opts.now ?? Date.now;
  const etas = mappingEtas(now);
  if (opts.tty) return liveDisplay(opts, { etas, now });

  const interval = opts.intervalMs ?? 2000;
  const last = new Map<string, number>();
  return {
    onEvent(e) {
      if (e.type === 'target') opts.write(targetLine(e));
      else if (e.type === 'phase-start') {
        etas.reset(e.mapping);
        opts.write(`[${e.mapping}] ${e.resourceType}: started`);
      } else if (e.type === 'progress') {
        // The estimator sees every event (its rate is measured from the first); the line is formatted only when printed.
        const etaMs = etas.update(e.mapping, e.bytes);
        const t = now();
        if (t - (last.get(e.mapping) ?? -Infinity) >= interval) {
          last.set(e.mapping, t);
          opts.write(`[${e.mapping}] ${e.bytes ? `${describeBytes(e.bytes, etaMs)} · ` : ''}${summary(e.counts)}`);
        }
      } else if (e.type === 'phase-end') opts.write(`[${e.mapping}] done: ${summary(e.counts)}`);
      else if (e.type === 'reject') reject(describeReject(e.reject), opts.write);
      else if (e.type === 'index' && opts.showIndexes !== false) opts.write(describeIndex(e.phase, e.build, e.purpose));
    },
    stop() {
      finish(opts.write);
    },
  };
}

/** Per mapping (one source per phase): its reading's ETA, restarted with each phase. */
function mappingEtas(now: () => number) {
  const etas = new Map<string, ByteEta>();
  return {
    update(mapping: string, b: ByteProgress | undefined): number | undefined {
      if (!b) return undefined;
      let eta = etas.get(mapping);
      if (!eta) etas.set(mapping, (eta = new ByteEta(now)));
      return eta.update(b);
    },
    reset: (mapping: string) => etas.delete(mapping),
  };
}

export interface RunProgress {
  onEvent: (e: RunEvent) => void;
  stop: () => void;
}

/**
 * The TTY display: a bar per mapping redrawn in place (rejects counted on it), log lines (target, listings) above
 * the bars, and after the bars stop the rejects, each wrapped to the width so its reason can be read whole.
 */
function liveDisplay(opts: ProgressOptions, ctx: { etas: ReturnType<typeof mappingEtas>; now: () => number }): RunProgress {
  const stream = opts.stream ?? process.stderr;
  const paint = painter(colourOn(stream));
  const area = new LiveArea(stream, 10, ctx.now);
  const bars = new Map<string, BarState>();
  const rejects: string[] = [];
  let hidden = 0;
  const max = opts.maxRejectLines ?? 20;
  // Events come per row; the bar lines are composed only when the area draws a frame (at most `fps` a second).
  const lines = () => {
    const nameWidth = Math.max(...[...bars.keys()].map((m) => m.length));
    return [...bars.values()].map((b) => barLine({ ...b, where: b.bytes && describeBytes(b.bytes) }, terminalWidth(stream), paint, formatDuration, nameWidth));
  };
  const draw = () => area.update(lines);
  const update = (mapping: string, counts: MappingCounts, bytes: ByteProgress | undefined, done: boolean) => {
    bars.set(mapping, { mapping, counts, bytes, etaMs: ctx.etas.update(mapping, bytes), done });
    draw();
  };
  return {
    onEvent(e) {
      if (e.type === 'target') area.log(targetLine(e));
      else if (e.type === 'phase-start') {
        ctx.etas.reset(e.mapping);
        bars.set(e.mapping, { mapping: e.mapping, counts: emptyCounts(), done: false });
        draw();
      } else if (e.type === 'progress' || e.type === 'phase-end') update(e.mapping, e.counts, e.bytes, e.type === 'phase-end');
      else if (e.type === 'reject') {
        if (rejects.length < max) rejects.push(describeReject(e.reject));
        else hidden++;
      } else if (e.type === 'index' && opts.showIndexes !== false) area.log(describeIndex(e.phase, e.build, e.purpose));
    },
    stop() {
      area.stop();
      if (!rejects.length) return;
      const width = terminalWidth(stream);
      const lines = [paint.bold(`Rejected rows (${rejects.length + hidden}):`)];
      for (const r of rejects) lines.push(...wrapLines(`${paint.red('✗')} ${r}`, width, '      ', '  '));
      if (hidden) lines.push(...wrapLines(`… and ${hidden} more rejected rows (see the rejects file)`, width, '    ', '  '));
      stream.write(`${lines.join('\n')}\n`);
    },
  };
}

function emptyCounts(): MappingCounts {
  return { read: 0, skipped: 0, created: 0, updated: 0, unchanged: 0, adopted: 0, rejected: 0, ended: 0, written: 0 };
}
