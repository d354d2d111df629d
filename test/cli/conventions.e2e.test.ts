/** `help`, `version` and unknown commands, through the built CLI (`npm run build`). */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import pkg from '../../package.json' with { type: 'json' };
import { describeUnknownCommand } from '../../src/cli/unknown-command.js';
import { JSON_FORMAT_VERSION } from '../../src/cli/render.js';
import { BIN, ROOT, runCli, runCliInProcess } from '../helpers/cli.js';

const NOT_FOUND_HINT = 'Run "care-etl help" for a list of commands.';

describe('care-etl help', () => {
  it('help run prints the run command help (as run --help does)', async () => {
    const [r, flag] = await Promise.all([runCliInProcess(['help', 'run']), runCliInProcess(['run', '--help'])]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Load an EMR export into the service');
    expect(r.stdout).toMatch(/USAGE\n\s+\$ care-etl run MAPPING/);
    expect(r.stdout).toBe(flag.stdout);
  });

  it('help with no argument prints the root help listing the commands, help and version included', async () => {
    const r = await runCliInProcess(['help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('USAGE\n  $ care-etl [COMMAND]');
    for (const c of ['run', 'validate', 'test', 'export', 'sandbox', 'help', 'version']) expect(r.stdout).toMatch(new RegExp(`^  ${c} `, 'm'));
  });

  it('help of a topic and of a command in a topic', async () => {
    const [topic, cmd] = await Promise.all([runCliInProcess(['help', 'state']), runCliInProcess(['help', 'state', 'check'])]);
    expect(topic.code).toBe(0);
    expect(topic.stdout).toContain('state rebuild');
    expect(cmd.code).toBe(0);
    expect(cmd.stdout).toMatch(/\$ care-etl state check MAPPING/);
  });

  it('help of an unknown command: the not-found message, exit 2', async () => {
    const r = await runCliInProcess(['help', 'runn']);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`"runn" is not a care-etl command. Did you mean "run"?\n${NOT_FOUND_HINT}\n`);
  });
});

describe('care-etl version', () => {
  it('prints care-etl/<version> <platform> node-v<version>, as --version does', async () => {
    const [r, flag] = await Promise.all([runCli(['version']), runCliInProcess(['--version'])]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`care-etl/${pkg.version} ${process.platform}-${process.arch} node-${process.version}\n`);
    expect(r.stdout).toBe(flag.stdout);
  });

  it('--json: { version, node, platform, exitCode, formatVersion }', async () => {
    const r = await runCliInProcess(['version', '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      version: pkg.version,
      node: process.versions.node,
      platform: `${process.platform}-${process.arch}`,
      exitCode: 0,
      formatVersion: JSON_FORMAT_VERSION,
    });
  });
});

describe('a mistyped command', () => {
  it.each([
    ['no colour settings', {}],
    ['FORCE_COLOR=0', { FORCE_COLOR: '0' }],
    ['NO_COLOR=1', { NO_COLOR: '1' }],
    ['FORCE_COLOR=3', { FORCE_COLOR: '3' }],
  ])('prints the closest command and how to list them on stderr, exit 2 (%s)', async (_name, env) => {
    const r = await runCliInProcess(['runn', 'examples/clinic/mapping.yaml'], { env });
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`"runn" is not a care-etl command. Did you mean "run"?\n${NOT_FOUND_HINT}\n`);
  });

  it('suggests commands inside topics, and nothing when nothing is close', async () => {
    const [sub, topic, none] = await Promise.all([
      runCliInProcess(['state', 'chek', 'mapping.yaml']),
      runCliInProcess(['stat', 'rebuild']),
      runCliInProcess(['xyzzy']),
    ]);
    expect(sub.stderr).toBe(`"state chek" is not a care-etl command. Did you mean "state check"?\n${NOT_FOUND_HINT}\n`);
    expect(topic.stderr).toBe(`"stat rebuild" is not a care-etl command. Did you mean "state rebuild"?\n${NOT_FOUND_HINT}\n`);
    expect(none.stderr).toBe(`"xyzzy" is not a care-etl command.\n${NOT_FOUND_HINT}\n`);
    for (const r of [sub, topic, none]) expect(r.code).toBe(2);
  });

  it('never prompts: it ends on its own with stdin open and never written to', async () => {
    const child = spawn(process.execPath, [BIN, 'validte', 'mapping.yaml'], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const [code, signal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
    clearTimeout(timer);
    expect(signal).toBeNull();
    expect(code).toBe(2);
    expect(stderr).toContain('Did you mean "validate"?');
  });

  it('--json anywhere: the error envelope on stdout, nothing on stderr, exit 2', async () => {
    for (const args of [
      ['runn', '--json'],
      ['--json', 'runn'],
      ['runn', 'mapping.yaml', '--progress', 'none', '--json'],
    ]) {
      const r = await runCliInProcess(args);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe('');
      expect(JSON.parse(r.stdout)).toEqual({
        error: { name: 'CommandNotFound', message: '"runn" is not a care-etl command. Did you mean "run"?', hint: NOT_FOUND_HINT, issues: [] },
        exitCode: 2,
        formatVersion: JSON_FORMAT_VERSION,
      });
      expect(r.stdout.trim().split('\n')).toHaveLength(1);
    }
  });
});

describe('describeUnknownCommand', () => {
  const cat = {
    bin: 'care-etl',
    commands: ['export', 'help', 'init', 'run', 'sandbox', 'state check', 'state rebuild', 'test', 'validate', 'version'],
    topics: ['state'],
  };
  it('picks the typed command words and the closest command or topic', () => {
    expect(describeUnknownCommand(['runn', 'mapping.yaml'], cat)).toMatchObject({ typed: 'runn', suggestion: 'run' });
    expect(describeUnknownCommand(['state', 'chek'], cat)).toMatchObject({ typed: 'state chek', suggestion: 'state check' });
    expect(describeUnknownCommand(['stat'], cat)).toMatchObject({ typed: 'stat', suggestion: 'state' });
    expect(describeUnknownCommand(['stat', 'mapping.yaml'], cat)).toMatchObject({ typed: 'stat', suggestion: 'state' });
    expect(describeUnknownCommand(['exprot'], cat)).toMatchObject({ suggestion: 'export' });
    expect(describeUnknownCommand(['mapping.yaml'], cat)).toEqual({
      typed: 'mapping.yaml',
      suggestion: undefined,
      message: '"mapping.yaml" is not a care-etl command.',
      hint: NOT_FOUND_HINT,
    });
  });
});
