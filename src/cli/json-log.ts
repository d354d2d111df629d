/**
 * `--log-format json`: stderr as JSON lines, one object per event, each with `ts`, `level` and `event` (dbt's and
 * Meltano's `--log-format json`). Hand-written rather than pino: pino writes to fd 2 on its own (sonic-boom), past
 * the redaction every line of this process goes through (base-command.ts) — and these ~60 lines are all it takes.
 * Never a cell value: rejects carry their place, key, column and code; requests their method, type, status, time.
 */
import type { RunEvent, RunReport } from '../pipeline/run-report.js';
import type { Issue } from '../core/issues.js';

type LogLevelName = 'debug' | 'info' | 'warn' | 'error';

export interface JsonLog {
  write(level: LogLevelName, event: string, fields?: Record<string, unknown>): void;
  /** The pipeline's events (phase, index, progress at most every `intervalMs` per mapping, reject). */
  onRunEvent(e: RunEvent): void;
  /** One HTTP attempt: the resource type, never the URL's query (identifiers) nor a header. */
  onRequest(r: { method: string; path: string; status: number | 'error'; ms: number }): void;
  /** The last line of a command; written once (`verdictWritten`). */
  verdict(fields: Record<string, unknown>): void;
  readonly verdictWritten: boolean;
}

/** `Patient` from `/base/Patient/123?identifier=…`: the first segment named like a resource type. */
export function requestType(path: string): string | undefined {
  return path
    .split('?')[0]!
    .split('/')
    .find((seg) => /^[A-Z][A-Za-z]+$/.test(seg));
}

/** What a reject says in a log: where, which key and column, which code — its message only when it is care-etl's own. */
function rejectFields(r: Extract<RunEvent, { type: 'reject' }>['reject']): Record<string, unknown> {
  const first: (Issue & { column?: string }) | undefined = r.issues[0];
  return {
    mapping: r.mapping,
    stage: r.stage,
    file: r.file,
    line: r.line,
    record: r.record,
    key: r.key,
    column: first?.column,
    code: first?.code,
    path: first?.path,
    message: first && !first.serverText ? first.message : undefined,
    issues: r.issues.length,
  };
}

export function createJsonLog(opts: { write: (line: string) => void; minLevel?: LogLevelName; intervalMs?: number; now?: () => Date }): JsonLog {
  const order: LogLevelName[] = ['debug', 'info', 'warn', 'error'];
  const min = order.indexOf(opts.minLevel ?? 'info');
  const now = opts.now ?? (() => new Date());
  const interval = opts.intervalMs ?? 2000;
  const lastProgress = new Map<string, number>();
  let verdictWritten = false;
  const write = (level: LogLevelName, event: string, fields: Record<string, unknown> = {}) => {
    // A notice (a summary line that must never be silent) and the verdict pass any threshold.
    if (order.indexOf(level) < min && event !== 'verdict' && event !== 'notice') return;
    opts.write(`${JSON.stringify({ ts: now().toISOString(), level, event, ...fields })}\n`);
  };
  return {
    write,
    onRunEvent(e) {
      if (e.type === 'target') write('info', 'target', { baseUrl: e.baseUrl.split('?')[0], tenantId: e.tenantId, embedded: e.embedded });
      else if (e.type === 'phase-start') write('info', 'phase', { phase: 'start', mapping: e.mapping, resourceType: e.resourceType });
      else if (e.type === 'phase-end') write('info', 'phase', { phase: 'end', mapping: e.mapping, counts: e.counts });
      else if (e.type === 'index') write('info', 'listing', { phase: e.phase, purpose: e.purpose ?? 'reconcile', ...e.build });
      else if (e.type === 'reject') write('warn', 'reject', rejectFields(e.reject));
      else if (e.type === 'progress') {
        const t = now().getTime();
        if (t - (lastProgress.get(e.mapping) ?? -Infinity) < interval) return;
        lastProgress.set(e.mapping, t);
        write('info', 'progress', { mapping: e.mapping, counts: e.counts, bytes: e.bytes, concurrency: e.limit });
      }
    },
    onRequest: (r) => write('debug', 'request', { method: r.method, type: requestType(r.path), status: r.status, ms: Math.round(r.ms) }),
    verdict(fields) {
      verdictWritten = true;
      write('info', 'verdict', fields);
    },
    get verdictWritten() {
      return verdictWritten;
    },
  };
}

/** `run`'s verdict: the exit code, the totals and the time, and the warnings the summary would print. */
export function runVerdict(report: RunReport): Record<string, unknown> {
  return {
    command: 'run',
    exitCode: report.exitCode,
    durationMs: report.durationMs,
    totals: report.totals,
    failOnRejects: report.failOnRejects,
    stoppedEarly: report.stoppedEarly,
    interrupted: report.interrupted,
    warnings: report.warnings.length,
  };
}
