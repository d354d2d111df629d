import { Args } from '@oclif/core';
import { CareCommand } from '../cli/base-command.js';
import { connectionFlags, connectionFromFlags } from '../cli/connection-flags.js';
import { flag } from '../cli/flags.js';
import type { ErrorJson } from '../cli/render.js';
import type { PlanDocument } from '../pipeline/plan.js';
import type { ReconcilePolicy } from '../mapping/types.js';

export default class Plan extends CareCommand<PlanDocument | ErrorJson> {
  static override summary = 'Show what a run would do (creates, updates with diffs, ends, rejects), writing nothing.';
  static override description = `Maps every source like a run, lists each resource type on the server once, and decides every key against the state ledger and the server exactly as a run would (same match rules, same reconcile policy), without sending anything but reads and without writing the state (it reads a copy) or a rejects file. Per mapping: creates, updates (each with a field-level diff between the server's current resource and the one the run would send — id, meta, nulls and empty values ignored, as for adoption), unchanged, adoptions (found on the server by the match rule, unknown to the state), ends (onMissing: end, end dates) and rejects; also "drifted" resources: recorded as loaded and unchanged, so the run leaves them, yet different on the server.

The terminal shows a table and the first changes of each mapping (--limit); --out writes the whole plan as JSON (mode 0600: it holds patient values), --json prints it.

Exit codes (after terraform plan -detailed-exitcode): 0 no changes — the run would send nothing (it may still record adopted resources in its state); 4 changes — the run would create, update or end something (rows that would be rejected may be listed too); 1 no changes, but rows would be rejected; 2 usage, mapping, configuration or authentication error; 3 could not complete (server unreachable or failing, state file in use by a run, interrupted); 5 the run's ending guard would refuse to end a mapping's resources (onMissing: end; see --allow-ending) — the other changes are still listed.`;
  static override examples = [
    '<%= config.bin %> plan mapping.yaml',
    '<%= config.bin %> plan mapping.yaml --out plan.json',
    '<%= config.bin %> plan mapping.yaml --json; test $? -eq 4 && echo "changes to review"',
  ];
  static override args = { mapping: Args.string({ description: 'mapping file (YAML)', required: true }) };
  static override flags = {
    out: flag.out({ description: 'write the whole plan to this file as JSON (mode 0600)' }),
    limit: flag.limit({ description: 'changes shown per mapping and kind on the terminal (0: the table only); --out and --json hold them all', default: 10 }),
    state: flag.state({ description: 'state ledger file (default .care-etl/state.db beside the mapping); read, never written' }),
    reconcile: flag.reconcile({
      description: "the run's reconcile policy to plan for (default: the mapping's reconcile:, else auto) — see `care-etl run --help`",
    }),
    'index-page-size': flag['index-page-size'](),
    'allow-ending': flag['allow-ending']({
      description:
        "the run's --allow-ending to plan for: how many resources of each onMissing: end mapping it may end (a count or a percentage like 25%; default: the mapping's allowEnding:, else 10%) — see `care-etl run --help`",
    }),
    progress: flag.progress({ options: ['auto', 'lines', 'none'] }),
    ...connectionFlags,
    'max-retry-after': flag['max-retry-after'](),
  };

  async run(): Promise<PlanDocument | ErrorJson> {
    const { args, flags } = await this.parse(Plan);
    const [
      { planPipeline },
      { planDocument },
      { planProgress, renderPlan },
      { writeOutputFile },
      { redactKnown },
      { embeddedSandboxLine },
      { stampedWriter },
      { planVerdict, writeVerdict },
    ] = await Promise.all([
      import('../pipeline/run-pipeline.js'),
      import('../pipeline/plan.js'),
      import('../cli/plan-render.js'),
      import('../core/secure-fs.js'),
      import('../core/secret.js'),
      import('../cli/run-summary.js'),
      import('../cli/terminal.js'),
      import('../cli/terminal-verdict.js'),
    ]);
    const toStderr = (t: string) => process.stderr.write(t);
    // A log (not a TTY) gets timestamped lines; server listings only under --verbose.
    const write = process.stderr.isTTY ? (l: string) => toStderr(`${l}\n`) : stampedWriter(toStderr);
    const progress = this.progressMode(flags.progress) === 'none' ? undefined : planProgress(write, 20, this.logLevel === 'verbose');
    let doc: PlanDocument;
    let exitCode: number;
    try {
      const report = await planPipeline({
        mappingFile: args.mapping,
        connection: { ...connectionFromFlags(flags), maxRetryAfterMs: flags['max-retry-after'] },
        statePath: flags.state,
        reconcile: flags.reconcile as ReconcilePolicy | undefined,
        indexPageSize: flags['index-page-size'],
        allowEnding: flags['allow-ending'],
        onEvent: progress?.onEvent,
        onRequest: this.requestLog,
        signal: this.signal,
      });
      doc = planDocument(report);
      exitCode = report.exitCode;
      if (flags.out && !report.interrupted) await writeOutputFile(flags.out, `${redactKnown(JSON.stringify(doc, null, 2))}\n`);
    } catch (err) {
      progress?.stop();
      return this.fail(err);
    }
    progress?.stop();
    process.exitCode = exitCode;
    if (!this.jsonEnabled()) {
      this.log(renderPlan(doc, flags.limit, exitCode));
      if (flags.out) this.log(doc.interrupted ? `Interrupted: ${flags.out} was not written.` : `The whole plan: ${flags.out}`);
    }
    this.notice(embeddedSandboxLine(doc.target));
    if (!this.jsonEnabled() && this.logLevel !== 'quiet') writeVerdict(planVerdict(doc));
    return doc;
  }
}
