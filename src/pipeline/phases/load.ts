/**
 * `care-etl run`: each mapping's rows read, transformed and validated, each resource sent (a dry run writes it to
 * `--out`), then lost creates reconciled and keys gone from the export reported or ended.
 */
import type { CompiledResource } from '../../mapping/compile-mapping.js';
import { decideIdentity, MatchClaims } from '../../load/identity-check.js';
import type { SyncOutcome } from '../../load/resource-sync.js';
import { matchRuleOf } from '../../load/server-index.js';
import { CreatedKeys } from '../../load/duplicate-check.js';
import { openSource } from '../../sources/open-source.js';
import { transformSource, type MappedResource } from '../../transform/transform-source.js';
import { loadReject } from '../../transform/reject-record.js';
import { validateResource } from '../../validate/resource-validator.js';
import { guardEnding } from '../ending-settings.js';
import { verifyPhase } from './verify.js';
import { EarlyVerify } from './verify-early.js';
import type { RunReport } from '../run-report.js';
import { openLeasedLedger, runExitCode, type MappingPhase, type RunContext, type RunMode } from './run-context.js';

/** Vanished keys listed in the report at most (the count is always complete). */
const MAX_VANISHED_LISTED = 1000;

export const loadMode: RunMode = {
  label: 'run',
  loads: true,
  recordsRun: true,
  keepsBodies: false,
  foundIdsFirst: false,
  overlapsPhases: true,
  openState: openLeasedLedger,
  begin: () => {},
  async mapping(phase, run) {
    const created = new CreatedKeys(matchRuleOf(phase.res));
    const early = new EarlyVerify(phase, run, created);
    try {
      await loadPhase(phase, run, created, early);
      if (run.report.interrupted) {
        phase.phaseEnd();
        return 'stop'; // creates whose answer is unknown stay recorded as intents: the next run settles them first
      }
      run.sourcesAhead?.createsEnded(phase.name); // the mappings waiting for this one's check open their sources
      if (phase.sync) await settlePhase(phase, run, created, early);
      phase.phaseEnd();
      return run.report.stoppedEarly ? 'stop' : 'next';
    } finally {
      await early.drop(); // a listing started early and not read (the phase failed): stopped, settled
      await phase.ahead?.close(); // read to its end, or not read (the phase failed before): its file closed
    }
  },
  end(run) {
    if (!run.client) return; // a dry run sent nothing
    const c = run.limiter.stats();
    run.report.concurrency = {
      mode: c.growth === 'aimd' ? 'pinned' : 'discovered',
      settled: c.settled,
      max: c.max,
      maxInFlight: c.maxInFlight,
      ceiling: c.ceiling,
      started: run.startWindow.window,
      ...(run.startWindow.rememberedFrom !== undefined ? { rememberedFrom: run.startWindow.rememberedFrom } : {}),
    };
  },
  exitCode: runExitCode,
};

/** Counts what the loader did with one resource (a refused write is a reject of its row); notes what it created. */
async function applyOutcome(phase: MappingPhase, report: RunReport, item: MappedResource, o: SyncOutcome, created?: CreatedKeys): Promise<void> {
  const adding = o.kind === 'created' ? created?.add(item, o.serverId) : undefined;
  if (adding) await adding;
  switch (o.kind) {
    case 'created':
    case 'updated':
    case 'unchanged':
      phase.counts[o.kind]++;
      if (o.adopted) phase.counts.adopted++;
      for (const member of (o.kind !== 'unchanged' && o.endedMembers) || []) {
        phase.counts.ended++;
        report.ended.push({ mapping: phase.name, key: item.key, serverId: o.serverId, member });
      }
      break;
    case 'rejected':
      phase.onReject(loadReject(phase.name, item, o.issues));
      break;
    case 'deferred':
      break;
  }
  phase.progress();
}

/**
 * `run`: the phase's source read, transformed and validated; each resource sent (a dry run writes it), with at
 * most twice the concurrency queued. A failure that ends the run is raised once the requests in flight settled.
 */
async function loadPhase(phase: MappingPhase, run: RunContext, created: CreatedKeys, early: EarlyVerify): Promise<void> {
  const { opts, report } = run;
  const { name, counts, loaded, sync } = phase;
  const selection = run.selection;
  if (selection) selectRefusedKeys(run, name);
  /**
   * --only-rejected: keys read but not selected are marked seen by this run (as unchanged ones are), so that a
   * pending create of such a key is left for the next full run rather than taken for a key gone from the source.
   */
  const notSelectedSeen: string[] = [];
  const flushNotSelected = () => {
    const keys = notSelectedSeen.splice(0);
    if (keys.length && run.scope && run.runId !== undefined) run.scope.markSeen(name, keys, run.runId);
  };
  await sync?.prepare();
  // Dry run: the loader's offline decisions (src/load/identity-check.ts), made as the run makes them.
  const dryRule = opts.dryRun ? matchRuleOf(phase.res) : undefined;
  const dryClaims = opts.dryRun ? new MatchClaims() : undefined;

  const abort = new AbortController();
  const signal = AbortSignal.any([opts.signal, run.halt, abort.signal].filter((s): s is AbortSignal => s !== undefined));
  const inFlight = new HandOffs();
  /** A failure that ends the run (the ledger, the server gone): raised once the requests in flight settled. */
  let fatal: { error: unknown } | undefined;
  const tooMany = () => opts.maxErrors !== undefined && run.totalRejected >= opts.maxErrors;
  const interrupted = () => {
    if (!opts.signal?.aborted) return false;
    report.interrupted = true;
    report.stoppedEarly ??= 'interrupted (SIGINT/SIGTERM): the rows not read yet are loaded by the next run';
    return true;
  };
  /** One resource to the loader and its outcome booked (one async call: no promise chain per row, issue 28 item 3). */
  const handOff = async (item: MappedResource): Promise<void> => {
    try {
      await applyOutcome(phase, report, item, await sync!.sync(item), created);
      early.onRow(counts.read, counts.read - inFlight.size + 1); // + this one, still in `inFlight`
    } catch (error) {
      // The loader failed, or booking its outcome did (the rejects file): the run ends once the rest settled.
      fatal ??= { error };
      abort.abort();
    }
  };
  try {
    for await (const item of transformSource(phase.res, phase.ahead?.take(signal) ?? openSource(phase.source, { signal, bytes: phase.bytes }), {
      ctx: run.ctx,
      validate: validateResource,
      onRead: () => counts.read++,
      onSkip: (n) => {
        counts.skipped += n;
        phase.progress();
      },
    })) {
      if (fatal || interrupted() || run.halt?.aborted) break;
      const chosen = !selection || selection.selects(name, item.ok ? { key: item.key, lines: item.lines, ...item.origin } : item);
      if (selection && chosen) report.selection!.selected++;
      if (!item.ok) {
        phase.onReject(item);
        phase.progress();
      } else if (!chosen) {
        // Read, its key taken (duplicates, `$ref`), not sent: neither created nor updated.
        counts.notSelected = (counts.notSelected ?? 0) + 1;
        if (loaded) loaded.set(item.key, 0);
        notSelectedSeen.push(item.key);
        if (notSelectedSeen.length >= 1000) flushNotSelected();
        phase.progress();
      } else if (opts.dryRun) {
        const identity = await decideIdentity(dryRule!, item.resource);
        if (!identity.ok) await applyOutcome(phase, report, item, { kind: 'rejected', issues: identity.issues });
        else {
          dryClaims!.claim(identity.matchValue, item.key);
          loaded!.set(item.key, 0);
          await run.dryOut.write(item.type, JSON.stringify(item.resource)); // waits only when the disk is behind
          counts.written++;
          phase.progress();
        }
      } else {
        // Bounded hand-off: the transform waits when twice the concurrency is queued (flat memory).
        await inFlight.room(run.limiter.limit * 2);
        inFlight.add(handOff(item));
      }
      if (tooMany()) {
        report.stoppedEarly = `${opts.maxErrors} row(s) rejected (--max-errors ${opts.maxErrors})`;
        abort.abort();
        break;
      }
    }
    early.readEnded(counts.read);
  } catch (err) {
    // The source stops with an AbortError when interrupted: that is the end of the reading, not a failure.
    if (!interrupted() && !fatal) throw err;
  } finally {
    await inFlight.settled();
    sync?.flush();
    flushNotSelected();
  }
  if (fatal && !interrupted()) throw fatal.error;
  // Another mapping failed: this one's rows were not all read, so it must not settle (no onMissing: end).
  if (run.halt?.aborted && !interrupted()) throw run.halt.reason;
  if (dryClaims?.shared) report.warnings.push(sharedMatchWarning(name, phase.res, dryClaims.shared));
}

/** The resources handed to the loader and not done yet; the reading waits for room (one waiter: no race over the set per row). */
class HandOffs {
  readonly #pending = new Set<Promise<void>>();
  #freed: (() => void) | undefined;

  get size(): number {
    return this.#pending.size;
  }

  /** `work` never rejects (failures are booked inside it): `then` is its end, without `finally`'s extra promises. */
  add(work: Promise<void>): void {
    this.#pending.add(work);
    void work.then(() => {
      this.#pending.delete(work);
      const wake = this.#freed;
      this.#freed = undefined;
      wake?.();
    });
  }

  async room(bound: number): Promise<void> {
    while (this.#pending.size >= bound) await new Promise<void>((resolve) => (this.#freed = resolve));
  }

  settled(): Promise<unknown> {
    return Promise.allSettled(this.#pending);
  }
}

/** --only-rejected: keys whose last write the server refused, never loaded since, are rejected "last time" too, whatever the file says. */
function selectRefusedKeys(run: RunContext, name: string): void {
  if (!run.scope) return;
  for (const e of run.scope.entries(name)) if (e.status === 'rejected') run.selection!.addKey(name, e.key, true);
}

/** The run's (and the dry run's) warning about source keys sharing one match value. */
function sharedMatchWarning(name: string, res: CompiledResource, shared: number): string {
  return `${name}: ${shared} key(s) share their match value (\`match: ${res.def.match}\`) with another key; without the state they are told apart on the server by content only (a changed one is then rejected until the other is settled) — \`care-etl validate --sample N\` names them`;
}

/** After the rows: lost creates reconciled, then keys no longer in the export reported (`ignore`) or ended (`end`). */
async function settlePhase(phase: MappingPhase, run: RunContext, created: CreatedKeys, early: EarlyVerify): Promise<void> {
  const { report } = run;
  const { name, res, counts } = phase;
  const sync = phase.sync!;
  const selection = run.selection;
  for await (const { item, outcome } of sync.reconcile()) await applyOutcome(phase, report, item, outcome, created);
  sync.flush(); // the next phase's `$ref`s read these server ids from the ledger
  await verifyPhase(phase, run, created, early.take()); // before onMissing: a key set back to pending is neither loaded nor gone
  if (sync.sharedMatchValues) report.warnings.push(sharedMatchWarning(name, res, sync.sharedMatchValues));
  if (sync.foreignOrphans)
    report.warnings.push(
      `${name}: ${sync.foreignOrphans} interrupted create(s) of keys no longer in the source were recorded under another CARE_STATE_SECRET: they stay pending (never created twice) until a run with that secret reconciles them`,
    );
  // A row rejected before loading is still in the export: it must not count as "gone".
  if (phase.rejectedSeen.size) run.scope!.markSeen(name, [...phase.rejectedSeen], run.runId!);
  if (res.def.onMissing !== 'end' && !selection && !report.stoppedEarly && phase.keylessRejects === 0) {
    // Not acted on, but said: the clinic should know which patients left the export.
    // Only the listed ones read, counted only when there are more: reading 5,000 entries held the loop 74 ms while the
    // next phase started (and a few gone from a large mapping are one statement, as before).
    const room = MAX_VANISHED_LISTED - (report.vanished?.length ?? 0);
    const listed = room > 0 ? run.scope!.notSeenSince(name, run.runId!, room) : [];
    const gone = room > 0 && listed.length < room ? listed.length : run.scope!.notSeenCount(name, run.runId!);
    if (gone) {
      report.vanishedCount = (report.vanishedCount ?? 0) + gone;
      report.vanished ??= [];
      for (const e of listed) report.vanished.push({ mapping: name, key: e.key, serverId: e.serverId });
      report.warnings.push(
        `${name}: ${gone} key(s) loaded by an earlier run are no longer in the export (onMissing: ignore leaves them as they are on the server)`,
      );
    }
  }
  if (res.def.onMissing === 'end') {
    if (selection) {
      report.warnings.push(
        `${name}: onMissing: end skipped — --only-rejected sends only the selected rows, and a key merely not selected is not gone from the export`,
      );
    } else if (report.stoppedEarly || phase.keylessRejects > 0) {
      report.warnings.push(
        `${name}: onMissing: end skipped — ${report.stoppedEarly ? 'the run stopped early' : `${phase.keylessRejects} row(s) were rejected before their key was known`}, so absent keys cannot be told apart from unread ones`,
      );
    } else {
      const missing = sync.missingEntries();
      if (!guardEnding(report, res, phase.ending!, { wouldEnd: missing.length, rowsRead: counts.read, membersEnded: counts.ended })) return;
      const { ended, failed } = await sync.endMissing(missing);
      counts.ended += ended.length;
      for (const e of ended) report.ended.push({ mapping: name, ...e });
      for (const f of failed)
        phase.onReject({ stage: 'load', mapping: name, source: phase.source.name, file: phase.source.path, key: f.key, issues: f.issues });
    }
  }
}
