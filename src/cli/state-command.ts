import { Args } from '@oclif/core';
import { connectionFlags, connectionFromFlags } from './connection-flags.js';
import { flag } from './flags.js';
import type { ErrorJson } from './render.js';
import type { RunReport } from '../pipeline/run-report.js';
import type { CommandShell } from './base-command.js';

/** Arguments and flags shared by `state rebuild` and `state check`. */
export const stateArgs = { mapping: Args.string({ description: 'mapping file (YAML)', required: true }) };
export const stateFlags = {
  state: flag.state(),
  'index-page-size': flag['index-page-size'](),
  progress: flag.progress({ options: ['auto', 'lines', 'none'] }),
  ...connectionFlags,
};

type StateFlags = { state?: string; 'index-page-size'?: number; progress: string; 'wait-for-lock'?: number } & Parameters<typeof connectionFromFlags>[0];

/** Runs `checkState` or `rebuildState` for a thin command: progress lines on stderr, a table per mapping, exit code set. */
export async function runStateCommand(cmd: CommandShell, mapping: string, flags: StateFlags, record: boolean): Promise<RunReport | ErrorJson> {
  const [{ checkState, rebuildState }, { createRunProgress }, { table }, { embeddedSandboxLine }] = await Promise.all([
    import('../pipeline/run-pipeline.js'),
    import('./run-progress.js'),
    import('./render.js'),
    import('./run-summary.js'),
  ]);
  const { json } = cmd;
  const progress = cmd.progress === 'none' ? undefined : await createRunProgress({ tty: false, write: (l) => process.stderr.write(`${l}\n`) });
  let report: RunReport;
  try {
    report = await (record ? rebuildState : checkState)({
      mappingFile: mapping,
      connection: connectionFromFlags(flags),
      statePath: flags.state,
      indexPageSize: flags['index-page-size'],
      waitForLockMs: flags['wait-for-lock'],
      onLockNotice: (l) => process.stderr.write(`${l}\n`),
      onEvent: progress?.onEvent,
      onRequest: cmd.onRequest,
      signal: cmd.signal,
    });
  } catch (err) {
    progress?.stop();
    return cmd.fail(err);
  }
  progress?.stop();
  if (!json) {
    const head = ['mapping', 'source keys', 'in state', 'on server', 'differing', 'by match', 'not on server', 'only on server', 'state but gone', 'rejected'];
    const rows = report.order.map((n) => {
      const c = report.state![n]!;
      return [n, c.sourceKeys, c.inLedger, c.foundOnServer, c.differing, c.foundByMatch, c.notOnServer, c.onlyOnServer, c.syncedButAbsent, c.rejected];
    });
    cmd.log(table(head, rows));
    for (const b of report.indexes) cmd.log(`Listed ${b.resourceType}: ${b.resources} resource(s) in ${b.pages} page(s)`);
    if (record)
      cmd.log(`State ${report.statePath} rebuilt from the server (nothing was sent but reads). A run now creates "not on server" and updates "differing".`);
    else
      cmd.log(
        `Nothing was written. "by match": on the server but unknown to the state (\`state rebuild\` records them); "state but gone": recorded as loaded, missing on the server (the next run creates them again).`,
      );
  }
  cmd.notice(embeddedSandboxLine(report.target));
  process.exitCode = report.exitCode;
  return report;
}
