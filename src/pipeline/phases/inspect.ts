/**
 * `care-etl state check` and `state rebuild`: each mapping's keys looked up on the server (`ResourceSync.inspect`),
 * then the ledger's own entries checked against the same listing. A rebuild records what it finds; a check writes
 * nothing.
 */
import { loadReject } from '../../transform/reject-record.js';
import { ExitCode, hasCode } from '../../core/issues.js';
import type { Inspection } from '../../load/resource-sync.js';
import { openSource } from '../../sources/open-source.js';
import { transformSource, type MappedResource } from '../../transform/transform-source.js';
import { validateResource } from '../../validate/resource-validator.js';
import { emptyStateCounts, type RunReport, type StateCounts } from '../run-report.js';
import { openLedger, openLeasedLedger, runExitCode, type MappingPhase, type RunContext, type RunMode } from './run-context.js';

function inspectMode(mode: Pick<RunMode, 'label' | 'recordsRun' | 'exitCode'>): RunMode {
  return {
    ...mode,
    loads: false,
    keepsBodies: false,
    foundIdsFirst: false,
    // A rebuild writes the ledger: under the run lease; a check writes nothing: no lease.
    openState: mode.recordsRun ? openLeasedLedger : openLedger,
    begin(report) {
      report.state = Object.fromEntries(report.order.map((n) => [n, emptyStateCounts()]));
    },
    async mapping(phase, run) {
      await inspectPhase(phase, run);
      phase.phaseEnd();
      return 'next';
    },
    end: () => {},
  };
}

const stateCounts = (report: RunReport): StateCounts[] => Object.values(report.state ?? {});

/** Keys that cannot be settled (exit 1), or else as a run. */
export const rebuildMode = inspectMode({
  label: 'state rebuild',
  recordsRun: true,
  exitCode: (report) => (stateCounts(report).some((c) => c.rejected > 0) ? ExitCode.rejected : runExitCode(report)),
});

/** Keys that cannot be settled, or resources recorded as loaded that the server no longer has (exit 1), or else as a run. */
export const checkMode = inspectMode({
  label: 'state check',
  recordsRun: false,
  exitCode: (report) => (stateCounts(report).some((c) => c.rejected > 0 || c.syncedButAbsent > 0) ? ExitCode.rejected : runExitCode(report)),
});

/**
 * One mapping of `state rebuild|check`: each mapped key looked up on the server (`ResourceSync.inspect`),
 * then the ledger's own entries checked against the same listing.
 */
async function inspectPhase(phase: MappingPhase, run: RunContext): Promise<void> {
  const { name, res, counts } = phase;
  const sync = phase.sync!;
  const scope = run.scope!;
  // A rebuild writes what it finds to the ledger; a check writes nothing (it does not record itself as a run either).
  const record = run.mode.recordsRun;
  const c = run.report.state![name]!;
  const found = new Map<string, string>();
  run.foundIds.set(name, found);
  const keys = new Set<string>();
  const matched = new Set<string>();
  for await (const item of transformSource(res, openSource(phase.source, { signal: run.opts.signal, bytes: phase.bytes }), {
    ctx: run.ctx,
    validate: validateResource,
    onRead: () => counts.read++,
    onSkip: (n) => (counts.skipped += n),
  })) {
    if (!item.ok) {
      if (item.key !== undefined && !hasCode(item.issues[0], 'duplicate-key')) keys.add(item.key);
      c.rejected++;
      phase.onReject(item);
      phase.progress();
      continue;
    }
    keys.add(item.key);
    if (scope.serverIdOf(name, item.key)) c.inLedger++;
    tally(item, await sync.inspect(item, record));
    phase.progress();
  }
  for await (const { item, inspection } of sync.settleAmbiguousInspections(record)) tally(item, inspection);
  function tally(item: MappedResource, r: Inspection): void {
    if (r.kind === 'deferred') return;
    if (r.kind === 'found') {
      c.foundOnServer++;
      if (!r.equal) c.differing++;
      if (r.via === 'match') c.foundByMatch++;
      found.set(item.key, r.serverId);
      matched.add(r.serverId);
      counts[r.equal ? 'unchanged' : 'updated']++;
      if (r.via === 'match') counts.adopted++;
    } else if (r.kind === 'absent') {
      c.notOnServer++;
      counts.created++;
      if (r.vanished) c.syncedButAbsent++;
    } else {
      c.rejected++;
      phase.onReject(loadReject(name, item, r.issues));
    }
  }
  c.sourceKeys = keys.size;
  const index = await run.indexes!.get(res.def.type, run.mode.label);
  for (const id of index.ids()) if (!matched.has(id)) c.onlyOnServer++;
  // Entries of keys no longer in the source: recorded as loaded, but does the server still have them?
  for (const e of [...scope.entries(name)]) {
    if (keys.has(e.key) || !e.serverId || e.status !== 'synced' || index.get(e.serverId)) continue;
    c.syncedButAbsent++;
    if (record) scope.forget(name, e.key);
  }
}
