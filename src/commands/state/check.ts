import { CareCommand } from '../../cli/base-command.js';
import type { ErrorJson } from '../../cli/render.js';
import { runStateCommand, stateArgs, stateFlags } from '../../cli/state-command.js';
import type { RunReport } from '../../pipeline/run-report.js';

export default class StateCheck extends CareCommand<RunReport | ErrorJson> {
  static override summary = 'Compare the source, the state ledger and the server, writing nothing.';
  static override description = `Per mapping: keys in the source, in the state, found on the server (and of those, differing from the mapping), found only by the match rule, not on the server, server resources no source key matches ("only on server"), and entries the state records as loaded whose resource the server no longer has.

Exit codes: 0 consistent; 1 entries recorded as loaded are gone from the server, or keys cannot be settled (duplicates on the server); 2 configuration or authentication error.`;
  static override examples = ['<%= config.bin %> state check mapping.yaml', '<%= config.bin %> state check mapping.yaml --json'];
  static override args = stateArgs;
  static override flags = stateFlags;

  async run(): Promise<RunReport | ErrorJson> {
    const { args, flags } = await this.parse(StateCheck);
    return runStateCommand(this.shell(flags.progress), args.mapping, flags, false);
  }
}
