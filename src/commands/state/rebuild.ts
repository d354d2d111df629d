import { CareCommand } from '../../cli/base-command.js';
import type { ErrorJson } from '../../cli/render.js';
import { flag } from '../../cli/flags.js';
import { runStateCommand, stateArgs, stateFlags } from '../../cli/state-command.js';
import type { RunReport } from '../../pipeline/run-report.js';

export default class StateRebuild extends CareCommand<RunReport | ErrorJson> {
  static override summary = 'Rebuild the state ledger from the server, sending nothing but reads.';
  static override description = `Maps every source like a run, lists each resource type on the server once (following next links) and records, for every source key whose resource is found (by the ledger's id, else by the mapping's match rule), its server id and content. A key found twice on the server is reported, not recorded. Entries whose resource is gone from the server are dropped. A run after a rebuild sends only what differs: creates for "not on server", updates for "differing".

Use it when the state was lost (a fresh CI runner, another operator's machine) and listing the server on every run costs too much, or to adopt a tenant loaded by another tool before the first run.

Exit codes: 0 rebuilt; 1 some keys could not be settled (duplicates on the server, rows that fail to map); 2 configuration or authentication error.`;
  static override examples = ['<%= config.bin %> state rebuild mapping.yaml', '<%= config.bin %> state rebuild mapping.yaml --state /cache/state.db --json'];
  static override args = stateArgs;
  static override flags = { ...stateFlags, 'wait-for-lock': flag['wait-for-lock']() };

  async run(): Promise<RunReport | ErrorJson> {
    const { args, flags } = await this.parse(StateRebuild);
    return runStateCommand(this.shell(flags.progress), args.mapping, flags, true);
  }
}
