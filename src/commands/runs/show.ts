import { Args } from '@oclif/core';
import { CareCommand } from '../../cli/base-command.js';
import { flag } from '../../cli/flags.js';
import type { ErrorJson } from '../../cli/render.js';
import type { RunInfo } from '../../state/ledger.js';
import type { RunReport } from '../../pipeline/run-report.js';
import { describeConcurrency } from '../../report/report-model.js';

export default class RunsShow extends CareCommand<RunInfo | ErrorJson> {
  static override summary = 'Show one recorded run: flags, counts per mapping, exit code, host.';
  static override description = `Exit codes: 0 shown; 2 no such run or no state file; 3 the state file is in use by a running care-etl.`;
  static override examples = ['<%= config.bin %> runs show mapping.yaml 12', '<%= config.bin %> runs show --state /cache/state.db 12 --json'];
  static override args = {
    first: Args.string({ description: 'mapping file, or the run number when --state is given', required: true }),
    id: Args.integer({ description: 'run number (see `care-etl runs`)' }),
  };
  static override flags = {
    state: flag.state(),
  };

  async run(): Promise<RunInfo | ErrorJson> {
    const { args, flags } = await this.parse(RunsShow);
    const [{ readRunHistory }, { table }, { CareEtlError, ExitCode }] = await Promise.all([
      import('../../pipeline/run-history.js'),
      import('../../cli/render.js'),
      import('../../core/issues.js'),
    ]);
    const [mappingFile, id] = args.id === undefined ? [undefined, Number(args.first)] : [args.first, args.id];
    let run: RunInfo;
    try {
      if (!Number.isInteger(id) || id < 1) throw new CareEtlError(`Expected a run number ≥ 1, got \`${args.id ?? args.first}\``, { exitCode: ExitCode.config });
      run = readRunHistory({ mappingFile, statePath: flags.state, id }).runs[0]!;
    } catch (err) {
      return this.fail(err);
    }
    const s = (run.summary ?? {}) as {
      exitCode?: number;
      flags?: Record<string, unknown>;
      host?: string;
      user?: string;
      version?: string;
      mappings?: Record<string, Record<string, number>>;
      stoppedEarly?: string;
      error?: string;
      concurrency?: RunReport['concurrency'];
    };
    this.log(`Run ${run.id} — ${run.mappingFile}${run.dryRun ? ' (dry run)' : ''}`);
    this.log(`  target    ${run.baseUrl ?? '?'} (tenant ${run.tenantId ?? '?'})`);
    this.log(`  started   ${run.startedAt}`);
    this.log(`  finished  ${run.finishedAt ?? '— (still running, or the process died)'}`);
    this.log(
      `  outcome   ${run.outcome ?? 'unfinished'}${s.exitCode !== undefined ? `, exit ${s.exitCode}` : ''}${s.stoppedEarly ? ` — ${s.stoppedEarly}` : ''}`,
    );
    if (s.error) this.log(`  error     ${s.error}`);
    if (s.host || s.user) this.log(`  by        ${s.user ?? '?'}@${s.host ?? '?'}${s.version ? ` (care-etl ${s.version})` : ''}`);
    if (s.concurrency) this.log(`  requests  ${describeConcurrency(s.concurrency)}`);
    if (s.flags)
      this.log(
        `  flags     ${
          Object.entries(s.flags)
            .filter(([, v]) => v !== undefined)
            .map(([k, v]) => `${k}=${String(v)}`)
            .join(' ') || '(none)'
        }`,
      );
    if (s.mappings) {
      // `skipped` when rows were (runs recorded before it existed have none)
      const skips = Object.values(s.mappings).some((c) => (c.skipped ?? 0) > 0);
      const cols = ['read', ...(skips ? ['skipped'] : []), 'created', 'updated', 'unchanged', 'adopted', 'rejected', 'ended'];
      this.log(
        table(
          ['mapping', ...cols],
          Object.entries(s.mappings).map(([n, c]) => [n, ...cols.map((k) => c[k] ?? 0)]),
        ),
      );
    }
    return run;
  }
}
