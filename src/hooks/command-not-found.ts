/**
 * oclif `command_not_found` hook (registered in package.json → oclif.hooks): `care-etl runn` prints
 * `"runn" is not a care-etl command. Did you mean "run"?` and how to list the commands on stderr — or the error
 * envelope on stdout with `--json` — and exits 2. It never prompts and prints plain text, so it shows whatever
 * FORCE_COLOR / NO_COLOR say (oclif's own `command runn not found` is replaced).
 */
import type { Hook } from '@oclif/core';
import { catalogue, describeUnknownCommand, reportUnknownCommand, wantsJson } from '../cli/unknown-command.js';

const hook: Hook.CommandNotFound = async function (opts) {
  // With a space topic separator oclif joins every word before the first flag into the id (`runn:mapping.yaml`);
  // a flag first (`care-etl --json runn`) becomes the id itself.
  const all = [...opts.id.split(':').filter(Boolean), ...(opts.argv ?? [])];
  const end = all.indexOf('--');
  const words = (end < 0 ? all : all.slice(0, end)).filter((w) => !w.startsWith('-'));
  const u = describeUnknownCommand(words.length ? words : [opts.id], catalogue(opts.config));
  reportUnknownCommand(u, wantsJson(all));
  // Returning (not throwing) ends the run with process.exitCode = 2 and nothing more printed.
};

export default hook;
