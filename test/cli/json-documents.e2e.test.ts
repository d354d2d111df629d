/** Every command's `--json` document — a result or the error envelope — carries `exitCode` and `formatVersion`. */
import { join } from 'node:path';
import { Config } from '@oclif/core';
import { afterAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { JSON_FORMAT_VERSION } from '../../src/cli/render.js';
import { copyTree, ROOT, runCli } from '../helpers/cli.js';

const clinic = copyTree('examples/clinic', 'care-etl-json-');
afterAll(() => rmSync(clinic, { recursive: true, force: true }));
const mapping = join(clinic, 'mapping.yaml');
const missingState = join(clinic, 'no-such-folder', 'state.db');

/** One cheap invocation per command: a success where it costs little, else a refused one (the error envelope). */
const CASES: Record<string, string[]> = {
  version: ['version'],
  validate: ['validate', mapping],
  test: ['test', join(clinic, 'mapping.test.yaml')],
  init: ['init', '--from', join(clinic, 'data', 'patients.csv'), '--out', join(clinic, 'starter', 'mapping.yaml')],
  run: ['run', mapping, '--dry-run', '--out', join(clinic, 'dry')],
  plan: ['plan', join(clinic, 'missing.yaml')],
  export: ['export', join(clinic, 'missing.yaml')],
  sandbox: ['sandbox', '--port', '70000'],
  studio: ['studio', join(clinic, 'missing.yaml')],
  runs: ['runs', '--state', missingState],
  'runs:show': ['runs', 'show', '1', '--state', missingState],
  'state:check': ['state', 'check', join(clinic, 'missing.yaml')],
  'state:rebuild': ['state', 'rebuild', join(clinic, 'missing.yaml')],
};

describe('--json documents', async () => {
  const config = await Config.load(ROOT);
  const ids = config.commands.map((c) => c.id).filter((id) => id !== 'help'); // help prints help, never JSON

  it('every command has a case here', () => {
    expect(Object.keys(CASES).sort()).toEqual([...ids].sort());
  });

  it.concurrent.each(Object.entries(CASES))('%s --json carries exitCode and formatVersion', async (_id, args) => {
    const r = await runCli([...args, '--json'], { cwd: clinic });
    const doc = JSON.parse(r.stdout) as { exitCode?: unknown; formatVersion?: unknown };
    expect(doc.exitCode).toBe(r.code);
    expect(doc.formatVersion).toBe(JSON_FORMAT_VERSION);
  });
});
