/**
 * `care-etl plan`, one mapping: every row through transform and validation as in a run, each key classified by
 * `ResourceSync.plan` (the type listed once, with bodies), then `onMissing: end` by `planEnds`. Fills
 * `report.plan[name]` and the mapping's counts (what the run's report would say). Zero writes: the ledger is a
 * snapshot behind a read-only view (src/pipeline/plan.ts).
 */
import { loadReject } from '../../transform/reject-record.js';
import { placeholderId } from '../../mapping/placeholder-id.js';
import { comparableDiff } from '../../load/identity.js';
import type { PlanOutcome } from '../../load/resource-sync.js';
import { openSource } from '../../sources/open-source.js';
import type { RejectRecord } from '../../transform/reject-record.js';
import { transformSource, type MappedResource } from '../../transform/transform-source.js';
import { validateResource } from '../../validate/resource-validator.js';
import { guardEnding } from '../ending-settings.js';
import { emptyPlanCounts, openLedgerSnapshot, PLAN_PLACEHOLDER, planExitCode, readOnlyScope } from '../plan.js';
import type { MappingPlan } from '../run-report.js';
import type { MappingPhase, RunContext, RunMode } from './run-context.js';

export const planMode: RunMode = {
  label: 'plan',
  loads: false,
  recordsRun: false,
  keepsBodies: true,
  foundIdsFirst: true,
  async openState(statePath, scopeUrl, tenantId) {
    // A copy: the real state file is never written, not even the scope row of a new server or tenant (PostgreSQL:
    // the state itself, its scope looked up only).
    const { ledger, dispose } = await openLedgerSnapshot(statePath);
    try {
      // The copy's ledger closed before its folder goes.
      return { ledger, scope: readOnlyScope(ledger.scope(scopeUrl, tenantId, { lookupOnly: true })), dispose: () => (ledger.close(), dispose()) };
    } catch (err) {
      ledger.close();
      dispose();
      throw err;
    }
  },
  begin(report) {
    report.plan = {};
  },
  async mapping(phase, run) {
    await planPhase(phase, run);
    phase.phaseEnd();
    return run.report.interrupted ? 'stop' : 'next';
  },
  end: () => {},
  exitCode: planExitCode,
};

/** One mapping's plan as it is filled: every key of the export (rejected rows included), keyless rejects. */
interface PlanInProgress {
  plan: MappingPlan;
  /** This mapping's key → server id (or placeholder of a planned create), for the `$ref`s of later phases. */
  planned: Map<string, string>;
  /** Every key of the export, rejected rows included: not "missing" for onMissing: end. */
  seen: Set<string>;
  keyless: number;
}

async function planPhase(phase: MappingPhase, run: RunContext): Promise<void> {
  const { name, res, counts } = phase;
  const { report } = run;
  const signal = run.opts.signal;
  const planned = new Map<string, string>();
  run.foundIds.set(name, planned);
  const plan: MappingPlan = {
    resourceType: res.def.type,
    reconcile: phase.policy,
    counts: emptyPlanCounts(),
    creates: [],
    updates: [],
    adoptions: [],
    ends: [],
    rejects: [],
    drifted: [],
  };
  report.plan![name] = plan;
  const inProgress: PlanInProgress = { plan, planned, seen: new Set(), keyless: 0 };
  const sync = phase.sync!;
  try {
    for await (const item of transformSource(res, openSource(phase.source, { signal }), {
      ctx: run.ctx,
      validate: validateResource,
      onRead: () => counts.read++,
      onSkip: (n) => (counts.skipped += n),
    })) {
      if (signal?.aborted) break;
      if (!item.ok) {
        rejectRow(phase, inProgress, item);
        phase.progress();
        continue;
      }
      inProgress.seen.add(item.key);
      tallyPlan(phase, inProgress, item, await sync.plan(item));
    }
  } catch (err) {
    if (!signal?.aborted) throw err;
  }
  if (signal?.aborted) {
    report.interrupted = true;
    report.stoppedEarly = 'interrupted (SIGINT/SIGTERM): the plan is incomplete';
    return;
  }
  for await (const { item, outcome } of sync.settleAmbiguousPlans()) tallyPlan(phase, inProgress, item, outcome);
  if (sync.sharedMatchValues) {
    report.warnings.push(
      `${name}: ${sync.sharedMatchValues} key(s) share their match value (\`match: ${res.def.match}\`) with another key; without the state they are told apart on the server by content only — \`care-etl validate --sample N\` names them`,
    );
  }
  if (res.def.onMissing === 'end') await planEnding(phase, run, inProgress);
  if (plan.drifted.length) {
    const gone = plan.drifted.filter((d) => d.gone).length;
    report.warnings.push(
      `${name}: ${plan.drifted.length} resource(s) recorded as loaded and unchanged differ on the server${gone ? ` (${gone} gone from it)` : ''}; the run leaves them${phase.policy === 'always' ? '' : ' — `--reconcile always` would bring them back in line'}`,
    );
  }
  const { written: _written, notSelected: _notSelected, ...runCounts } = counts;
  plan.counts = { ...runCounts, drifted: plan.drifted.length };
}

/** A row the run would reject: listed (never the row itself) and handed to the phase's reject handler. */
function rejectRow(phase: MappingPhase, p: PlanInProgress, r: RejectRecord): void {
  if (r.key === undefined) p.keyless++;
  else p.seen.add(r.key);
  p.plan.rejects.push({ stage: r.stage, file: r.file, line: r.line, record: r.record, lines: r.lines, key: r.key, issues: r.issues });
  phase.onReject(r);
}

/** One key's decision, counted as the run's report would count it and listed in the plan. */
function tallyPlan(phase: MappingPhase, p: PlanInProgress, item: MappedResource, o: PlanOutcome): void {
  const { counts } = phase;
  const { plan } = p;
  const where = { line: item.origin.line, ...(item.lines ? { lines: item.lines } : {}) };
  switch (o.kind) {
    case 'create':
      counts.created++;
      plan.creates.push({
        key: item.key,
        ...where,
        ...(o.recreate ? { recreate: o.recreate } : {}),
        ...(o.note ? { note: o.note } : {}),
        resource: item.resource,
      });
      p.planned.set(item.key, placeholderId(item.key, PLAN_PLACEHOLDER));
      break;
    case 'update':
      counts.updated++;
      if (o.adopted) {
        counts.adopted++;
        plan.adoptions.push({ key: item.key, serverId: o.serverId, updated: true });
      }
      plan.updates.push({
        key: item.key,
        serverId: o.serverId,
        ...where,
        ...(o.adopted ? { adopted: true } : {}),
        ...(o.endedMembers ? { endedMembers: o.endedMembers } : {}),
        diff: comparableDiff(o.before, o.after),
      });
      for (const member of o.endedMembers ?? []) {
        counts.ended++;
        plan.ends.push({ key: item.key, serverId: o.serverId, member });
      }
      p.planned.set(item.key, o.serverId);
      break;
    case 'unchanged':
      counts.unchanged++;
      if (o.adopted) {
        counts.adopted++;
        plan.adoptions.push({ key: item.key, serverId: o.serverId, updated: false });
      }
      if (o.drift)
        plan.drifted.push(
          o.drift.before
            ? { key: item.key, serverId: o.serverId, diff: comparableDiff(o.drift.before, o.drift.after) }
            : { key: item.key, serverId: o.serverId, gone: true },
        );
      p.planned.set(item.key, o.serverId);
      break;
    case 'rejected':
      rejectRow(phase, p, loadReject(phase.name, item, o.issues));
      break;
    case 'deferred':
      return;
  }
  phase.progress();
}

/** `onMissing: end`: the keys gone from the export, through the ending guard as the run would apply it. */
async function planEnding(phase: MappingPhase, run: RunContext, p: PlanInProgress): Promise<void> {
  const { name, res, counts } = phase;
  const { report } = run;
  if (p.keyless > 0) {
    report.warnings.push(
      `${name}: onMissing: end skipped — ${p.keyless} row(s) would be rejected before their key was known, so absent keys cannot be told apart from unread ones`,
    );
    return;
  }
  const { ends, failed, wouldEnd } = await phase.sync!.planEnds(p.seen);
  const members = p.plan.ends.length; // participants ended inside updates, listed above
  const allowed = !phase.ending || guardEnding(report, res, phase.ending, { wouldEnd, rowsRead: counts.read, membersEnded: members });
  if (report.endingGuard?.[name]) p.plan.endingGuard = report.endingGuard[name];
  if (!allowed) return;
  for (const e of ends) {
    counts.ended++;
    p.plan.ends.push({ key: e.key, serverId: e.serverId, diff: comparableDiff(e.before, e.after) });
  }
  for (const f of failed)
    rejectRow(phase, p, { stage: 'load', mapping: name, source: phase.source.name, file: phase.source.path, key: f.key, issues: f.issues });
}
