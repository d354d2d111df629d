import { Args } from '@oclif/core';
import { CareCommand } from '../../cli/base-command.js';
import { flag } from '../../cli/flags.js';
import type { ErrorJson } from '../../cli/render.js';
import type { RunHistory } from '../../pipeline/run-history.js';

export default class Runs extends CareCommand<RunHistory | ErrorJson> {
  static override summary = 'List the runs recorded in the state ledger, newest first.';
  static override description = `Every run that reached the server is recorded in the state ledger: when it started and ended, how it ended (completed, aborted: --max-errors or interrupted, failed), its exit code, flags, counts per mapping, host and user (never a secret). Dry runs write no ledger and are not listed. A state shared by several runners (one per tenant: docs/scale-out.md) lists every runner's runs; --tenant and --server keep those of one tenant or server.

Exit codes: 0 listed; 2 no state file (or a usage error); 3 the state file is in use by a running care-etl.`;
  static override examples = [
    '<%= config.bin %> runs examples/clinic/mapping.yaml',
    '<%= config.bin %> runs --state /cache/state.db --json',
    '<%= config.bin %> runs --state state.db --tenant t17 --server https://care.example',
    '<%= config.bin %> runs show mapping.yaml 12',
  ];
  static override args = { mapping: Args.string({ description: 'mapping file (its .care-etl/state.db is read; default: ./.care-etl/state.db)' }) };
  static override flags = {
    state: flag.state(),
    limit: flag.limit({ description: 'runs listed at most', default: 50, min: 1 }),
    tenant: flag.tenant(),
    server: flag.server(),
  };

  async run(): Promise<RunHistory | ErrorJson> {
    const { args, flags } = await this.parse(Runs);
    const [{ readRunHistory }, { table }, { describeRun }] = await Promise.all([
      import('../../pipeline/run-history.js'),
      import('../../cli/render.js'),
      import('../../cli/run-summary.js'),
    ]);
    let history: RunHistory;
    try {
      history = readRunHistory({ mappingFile: args.mapping, statePath: flags.state, limit: flags.limit, tenant: flags.tenant, server: flags.server });
    } catch (err) {
      return this.fail(err);
    }
    const filter = [flags.tenant && `tenant ${flags.tenant}`, flags.server && `server ${flags.server}`].filter(Boolean).join(', ');
    if (history.runs.length === 0) this.log(`No runs recorded in ${history.statePath}${filter ? ` for ${filter}` : ''}.`);
    else
      this.log(
        table(
          ['run', 'started', 'duration', 'outcome', 'exit', 'created', 'updated', 'unchanged', 'rejected', 'target'],
          history.runs.map((r) => describeRun(r)),
        ),
      );
    return history;
  }
}
