import type { MappingCounts, RunEvent } from '../pipeline/run-pipeline.js';
import { describeReject } from '../pipeline/rejects.js';
import type { IndexBuild } from '../load/server-index.js';

/** One line per server listing: when, why and what it cost (pages), so the price of a lost state is visible. */
export function describeIndex(phase: 'start' | 'end', b: IndexBuild): string {
  if (phase === 'start') return `[index] listing ${b.resourceType} on the server to find resources the state does not know: ${b.reason}`;
  const size = b.pageSize ? `_count=${b.pageSize}` : "the server's page size";
  return `[index] ${b.resourceType}: ${b.resources} resource(s) in ${b.pages} page(s) (${size}), ${(b.durationMs / 1000).toFixed(1)} s`;
}

export interface ProgressOptions {
  /** A progress bar per mapping on a TTY, plain lines otherwise. */
  tty: boolean;
  write: (line: string) => void;
  /** Plain mode: at most one progress line per mapping this often. */
  intervalMs?: number;
  /** Rejects echoed to the terminal before "… more in the rejects file". */
  maxRejectLines?: number;
}

const summary = (c: MappingCounts) =>
  `read ${c.read} · created ${c.created} · updated ${c.updated} · unchanged ${c.unchanged}${c.adopted ? ` · adopted ${c.adopted}` : ''} · rejected ${c.rejected}${c.ended ? ` · ended ${c.ended}` : ''}${c.written ? ` · written ${c.written}` : ''}`;

/**
 * Turns pipeline events into terminal output (stderr). Only locations, keys and counts are printed, never row
 * contents (patient data stays in the 0600 rejects file).
 */
export async function createRunProgress(opts: ProgressOptions): Promise<{ onEvent: (e: RunEvent) => void; stop: () => void }> {
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

  if (opts.tty) {
    const { MultiBar, Presets } = await import('cli-progress');
    const bars = new MultiBar(
      { format: ' {mapping} [{bar}] {done}/{read} rows · {stats}', hideCursor: true, clearOnComplete: false, stopOnComplete: false, etaBuffer: 50, fps: 10 },
      Presets.shades_classic,
    );
    const byMapping = new Map<string, ReturnType<InstanceType<typeof MultiBar>['create']>>();
    const update = (mapping: string, c: MappingCounts) => {
      const done = c.created + c.updated + c.unchanged + c.rejected + c.written; // adopted: counted in those
      const bar = byMapping.get(mapping);
      bar?.setTotal(Math.max(c.read, done, 1));
      bar?.update(done, { mapping: mapping.padEnd(14), done, read: c.read, stats: summary(c) });
    };
    return {
      onEvent(e) {
        if (e.type === 'target') bars.log(`${e.embedded ? 'No target configured: loading into the embedded sandbox' : 'Loading into'} ${e.baseUrl} (tenant ${e.tenantId}${e.dataFile ? `, data in ${e.dataFile}` : ''})\n`);
        else if (e.type === 'phase-start') byMapping.set(e.mapping, bars.create(1, 0, { mapping: e.mapping.padEnd(14), done: 0, read: 0, stats: '' }));
        else if (e.type === 'progress' || e.type === 'phase-end') update(e.mapping, e.counts);
        else if (e.type === 'reject') reject(describeReject(e.reject), (s) => bars.log(`${s}\n`));
        else if (e.type === 'index') bars.log(`${describeIndex(e.phase, e.build)}\n`);
      },
      stop() {
        bars.stop();
        finish(opts.write);
      },
    };
  }

  const interval = opts.intervalMs ?? 2000;
  const last = new Map<string, number>();
  return {
    onEvent(e) {
      if (e.type === 'target') opts.write(`${e.embedded ? 'No target configured: loading into the embedded sandbox' : 'Loading into'} ${e.baseUrl} (tenant ${e.tenantId}${e.dataFile ? `, data in ${e.dataFile}` : ''})`);
      else if (e.type === 'phase-start') opts.write(`[${e.mapping}] ${e.resourceType}: started`);
      else if (e.type === 'progress') {
        const now = Date.now();
        if (now - (last.get(e.mapping) ?? 0) >= interval) {
          last.set(e.mapping, now);
          opts.write(`[${e.mapping}] ${summary(e.counts)}`);
        }
      } else if (e.type === 'phase-end') opts.write(`[${e.mapping}] done: ${summary(e.counts)}`);
      else if (e.type === 'reject') reject(describeReject(e.reject), opts.write);
      else if (e.type === 'index') opts.write(describeIndex(e.phase, e.build));
    },
    stop() {
      finish(opts.write);
    },
  };
}
