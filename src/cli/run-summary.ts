import type { RunInfo } from '../state/ledger.js';

/** One row of `care-etl runs`. */
export function describeRun(r: RunInfo): (string | number)[] {
  const s = (r.summary ?? {}) as { exitCode?: number; totals?: Record<string, number> };
  const t = s.totals ?? {};
  const ms = r.finishedAt ? Date.parse(r.finishedAt) - Date.parse(r.startedAt) : undefined;
  return [
    r.id,
    r.startedAt.replace('T', ' ').replace(/\.\d+Z$/, 'Z'),
    ms === undefined ? '—' : `${(ms / 1000).toFixed(1)} s`,
    r.outcome ?? 'unfinished',
    s.exitCode ?? '—',
    t.created ?? 0,
    t.updated ?? 0,
    t.unchanged ?? 0,
    t.rejected ?? 0,
    `${r.baseUrl ?? '?'} ${r.tenantId ?? ''}`.trim(),
  ];
}

/**
 * The line saying a command used the embedded sandbox rather than a configured server: printed with the summary,
 * and under `--quiet`, `--json` and `--progress none` too (`CareCommand.notice`), so it is never silent.
 */
export function embeddedSandboxLine(target: { embedded: boolean; dataFile?: string } | undefined): string | undefined {
  if (!target?.embedded) return undefined;
  return `Target: the embedded sandbox${target.dataFile ? ` (data in ${target.dataFile})` : ''}, not a configured server — set CARE_BASE_URL or target.baseUrl for a real one`;
}

/**
 * The line of a cancelled run (SIGINT/SIGTERM, exit 3): what was written and what stays pending. Printed like the
 * sandbox line (`CareCommand.notice`): a cancel is never silent, not under `--json` or `--quiet` either.
 */
export function cancelledLine(report: { interrupted?: boolean; pendingCreates?: number; rejectsFile?: string; runId?: number }): string | undefined {
  if (!report.interrupted) return undefined;
  const pending = report.pendingCreates ?? 0;
  // No run id: cancelled before the run began (the lease wait, the first request): nothing was written.
  const written = report.runId === undefined ? '' : `${report.rejectsFile ? 'the rejects file and ' : ''}run ${report.runId} of the history written;`;
  return [
    'Cancelled (SIGINT/SIGTERM): the run stopped;',
    written,
    pending
      ? `${pending} create(s) not confirmed by the server stay pending — the next run looks each one up on the server before creating anything;`
      : 'no create is pending;',
    'the rows not processed yet are loaded by the next run.',
  ]
    .filter(Boolean)
    .join(' ');
}
