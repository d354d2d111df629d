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
