/**
 * `run`, after a phase's creates (`--verify-after-load`, issue 24 item 3): the type listed once more and the keys this
 * phase created checked against it (src/load/duplicate-check.ts). Duplicates made by another writer are named with
 * both ids; a key whose create was answered with an id the server lacks goes back to pending, for the next run to
 * reconcile (never created again here: that could duplicate it). Each finding is a reject of the key's row (exit 1).
 */
import { checkCreated, findingIssue, SECOND_WRITER_HINT, shouldVerify, type CreatedKeys, type Finding } from '../../load/duplicate-check.js';
import { isContentIdentity } from '../../load/identity.js';
import { MatchDigest } from '../../load/match-digest.js';
import { ServerIndexes } from '../../load/server-index.js';
import { loadReject } from '../../transform/reject-record.js';
import type { PhaseVerification } from '../run-report.js';
import type { MappingPhase, RunContext } from './run-context.js';

/** Keys listed per finding kind in the report (the counts are complete). */
const MAX_LISTED = 1000;

export async function verifyPhase(phase: MappingPhase, run: RunContext, created: CreatedKeys): Promise<void> {
  const { opts, report, scope, indexes } = run;
  if (!indexes || !scope || run.runId === undefined) return;
  if (created.unchecked) report.warnings.push(`${phase.name}: ${created.unchecked} created key(s) could not be checked for copies made by another writer`);
  if (!shouldVerify(opts.verifyAfterLoad ?? 'auto', created.keys.length, opts.sharedState ?? false)) return;
  const { name, res } = phase;
  const type = res.def.type;
  // A listing of its own: the run's indexes (and `indexes` in the report) stay the lookups made before creating.
  const listing = new ServerIndexes(indexes.client, new Map([[type, new Map([[name, created.rule]])]]), {
    ...indexes.opts,
    keepBodies: false,
    // each listed resource hashed only if a created key is known by its content alone (issue 28 item 3)
    hashes: created.keys.some((k) => isContentIdentity(k.matchValue)),
    onBuild: (e) => opts.onEvent?.({ type: 'index', ...e, purpose: 'verify' }),
  });
  const index = await listing.get(type, `the ${created.keys.length} ${name} key(s) this run created, checked for copies made by another writer`);
  const findings = checkCreated(created.keys, {
    listed: (id) => index.get(id) !== undefined,
    copies: (v) => index.lookup(name, v).map((r) => r.id),
    recorded: (id) => scope.keyOfServerId(type, id) !== undefined,
  });
  const build = listing.builds[0]!;
  const v: PhaseVerification = {
    mapping: name,
    resourceType: type,
    checked: created.keys.length,
    pages: build.pages,
    resources: build.resources,
    durationMs: build.durationMs,
    duplicateCount: 0,
    missingCount: 0,
    duplicates: [],
    missing: [],
  };
  for (const f of findings) {
    record(v, f);
    if (f.kind === 'missing') {
      // Back to pending (an intent of this run): the next run looks the key up before anything is created again.
      const entry = scope.get(name, f.created.key);
      scope.recordIntent({
        mapping: name,
        key: f.created.key,
        resourceType: type,
        hash: entry?.hash ?? '',
        // As the create recorded it (a digest, src/load/match-digest.ts): never the clear match value.
        matchValue: entry?.matchValue ?? (run.matchDigest ?? new MatchDigest()).of(f.created.matchValue),
        runId: run.runId,
      });
      phase.counts.created--;
    }
    phase.onReject(loadReject(name, f.created, [findingIssue(type, f)]));
  }
  // In mapping order, however the mappings running alongside finished.
  const order = run.compiled.order;
  (report.verification ??= []).push(v);
  report.verification.sort((a, b) => order.indexOf(a.mapping) - order.indexOf(b.mapping));
  if (v.duplicateCount)
    report.warnings.push(
      `${name}: ${v.duplicateCount} key(s) this run created were created by another writer too (duplicate-on-server, both ids in the rejects) — ${SECOND_WRITER_HINT}`,
    );
  if (v.missingCount)
    report.warnings.push(
      `${name}: ${v.missingCount} create(s) were answered with an id the server does not list (created-id-missing): left pending for the next run`,
    );
}

function record(v: PhaseVerification, f: Finding): void {
  if (f.kind === 'duplicate') {
    if (v.duplicateCount++ < MAX_LISTED) v.duplicates.push({ key: f.created.key, serverIds: [f.created.serverId, ...f.others] });
  } else if (v.missingCount++ < MAX_LISTED) v.missing.push({ key: f.created.key, serverId: f.created.serverId });
}
