/**
 * Issue 23 (one home per flag): every flag name is defined once (src/cli/flags.ts, the connection group in
 * connection-flags.ts), commands only call those definitions, and the combinations are declared on the flags, so
 * oclif's parser refuses them before a library function runs (parsed here in-process, with the commands' own flags).
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Parser } from '@oclif/core';
import { describe, expect, it } from 'vitest';
import Export from '../../src/commands/export.js';
import Plan from '../../src/commands/plan.js';
import Run from '../../src/commands/run.js';
import Runs from '../../src/commands/runs/index.js';
import StateCheck from '../../src/commands/state/check.js';
import Validate from '../../src/commands/validate.js';
import { ROOT } from '../helpers/cli.js';

type Command = { flags: Record<string, unknown>; args?: Record<string, unknown> };

/** oclif's parse of `argv` against a command's flags (its validation of declared combinations included). */
async function parse(cmd: Command, argv: string[]): Promise<Record<string, unknown>> {
  const out = await Parser.parse(argv, { flags: cmd.flags as never, args: (cmd.args ?? {}) as never, strict: true });
  return out.flags as Record<string, unknown>;
}

describe('one home per flag', () => {
  it('every flag name has one definition under src/ (scripts/flag-definitions.mjs)', () => {
    const rows = JSON.parse(execFileSync(process.execPath, [join(ROOT, 'scripts/flag-definitions.mjs'), '--json'], { cwd: ROOT, encoding: 'utf8' })) as {
      name: string;
      definitions: number;
      at: string[];
    }[];
    expect(rows.map((r) => r.name)).toEqual(expect.arrayContaining(['state', 'progress', 'out', 'index-page-size', 'base-url', 'max-in-flight']));
    expect(rows.filter((r) => r.definitions > 1)).toEqual([]);
  });

  it('no command defines a flag: src/commands/** only calls the definitions of src/cli', () => {
    const dir = join(ROOT, 'src/commands');
    const files = readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
    const defining = files.filter((f) => /\bFlags\.\w+\(|\w+Flag\(/.test(readFileSync(join(dir, f), 'utf8')));
    expect(defining).toEqual([]);
  });

  it('a variant keeps what it does not change: plan narrows --progress, keeps its default; --index-page-size is one flag in run, plan and state', () => {
    const plan = Plan.flags.progress as { options?: readonly string[]; default?: unknown; description?: string };
    const run = Run.flags.progress as { options?: readonly string[]; default?: unknown; description?: string };
    expect(plan.options).toEqual(['auto', 'lines', 'none']);
    expect(run.options).toEqual(['auto', 'bar', 'lines', 'none']);
    expect([plan.default, plan.description]).toEqual([run.default, run.description]);
    const pageSize = [Run, Plan, StateCheck].map((c) => (c.flags['index-page-size'] as { description?: string }).description);
    expect(new Set(pageSize).size).toBe(1);
    expect((Runs.flags.state as { description: string }).description).toBe((Export.flags.state as { description: string }).description);
  });

  it('a definition carries its declared rules to every command (--concurrency vs --max-concurrency, --allow-rejects needs --sample)', async () => {
    await expect(parse(Run, ['m.yaml', '--concurrency', '2', '--max-concurrency', '3'])).rejects.toThrow(/cannot also be provided when using --concurrency/);
    await expect(parse(Validate, ['m.yaml', '--allow-rejects'])).rejects.toThrow(/when using --allow-rejects: --sample/);
    expect(Object.keys(Export.flags)).toContain('json'); // export declares what --json excludes
  });
});

describe('combinations declared on the flags', () => {
  const refused: [string, string[], RegExp][] = [
    ['--bom with --format ndjson', ['--format', 'ndjson', '--bom'], /--format=ndjson cannot also be provided when using --bom/],
    [
      '--escape-formulas with --format ndjson',
      ['--format', 'ndjson', '--escape-formulas'],
      /--format=ndjson cannot also be provided when using --escape-formulas/,
    ],
    ['--column-names other', ['--column-names', 'camel'], /Expected --column-names=camel to be one of: original, snake/],
    ['--pseudonym-key-file without --pseudonymize', ['--pseudonym-key-file', 'k'], /when using --pseudonym-key-file: --pseudonymize/],
    ['--keep-free-text without --pseudonymize', ['--keep-free-text'], /when using --keep-free-text: --pseudonymize/],
    ['--columns with --layout wide', ['--columns', 'c.yaml', '--layout', 'wide'], /--layout=wide cannot also be provided when using --columns/],
    ['--dictionary naming --out', ['--out', 'x.csv', '--dictionary', 'x.csv'], /--out=x.csv cannot also be provided when using --dictionary/],
    ['--dictionary naming the partial file', ['--out', 'x.csv', '--dictionary', 'x.csv.partial'], /when using --dictionary/],
    ['--json without --out', ['--json'], /when using --json: --out/],
    ['--json with --out -', ['--json', '--out', '-'], /--out=- cannot also be provided when using --json/],
    ['--dictionary -', ['--dictionary', '-'], /Expected `--dictionary` to be a file path, got `-`/],
    ['--query without =', ['--query', 'x'], /Expected `--query` to be key=value, got `x`/],
    ['--patient empty', ['--patient', ' '], /Expected `--patient` to be a patient source key/],
    ['--since not a date', ['--since', 'yesterday'], /Expected `--since` to be `last`, an ISO date/],
  ];
  it.each(refused)('export: %s is refused by the parser', async (_, argv, message) => {
    await expect(parse(Export, ['m.yaml', ...argv])).rejects.toThrow(message);
  });

  it('export: the allowed neighbours parse (--bom with csv, named or defaulted; --json with a file; a key file with --pseudonymize)', async () => {
    await expect(parse(Export, ['m.yaml', '--bom'])).resolves.toMatchObject({ bom: true, format: 'csv' });
    await expect(parse(Export, ['m.yaml', '--bom', '--format', 'csv'])).resolves.toMatchObject({ bom: true });
    await expect(parse(Export, ['m.yaml', '--json', '--out', 'x.csv', '--dictionary', 'x.dictionary.csv'])).resolves.toMatchObject({ json: true });
    await expect(parse(Export, ['m.yaml', '--pseudonymize', '--pseudonym-key-file', 'k', '--keep-free-text', '--since', '2024-05-01'])).resolves.toMatchObject({
      pseudonymize: true,
    });
    await expect(parse(Export, ['m.yaml', '--patient', ' 00123 '])).resolves.toMatchObject({ patient: ['00123'] });
  });
});
