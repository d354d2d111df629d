/**
 * docs/commands.md is generated from the commands' metadata (scripts/commands-doc.mjs): this fails while the page on
 * disk differs from what the script writes now (a flag, summary or example changed without refreshing the page).
 * It reads the build (dist/), as the CLI tests do.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { commandsPage, PAGE, REFRESH_COMMAND } from '../../scripts/commands-doc.mjs';
import { referenceLink } from '../../src/cli/help.js';
import { ROOT, runCliInProcess } from '../helpers/cli.js';

test('docs/commands.md is the page generated from the commands', async () => {
  let onDisk = '';
  try {
    onDisk = readFileSync(join(ROOT, PAGE), 'utf8');
  } catch {
    // missing: compared as empty, so the message below says how to write it
  }
  expect(onDisk, `${PAGE} is stale: run \`${REFRESH_COMMAND}\` and commit the page`).toBe(await commandsPage());
});

test('run --help: at most 60 lines at 80 columns, none wider, examples before flags, a link to its section of the page', async () => {
  const r = await runCliInProcess(['run', '--help'], { env: { COLUMNS: '80' } });
  const lines = r.stdout.trimEnd().split('\n');
  expect(lines.length).toBeLessThanOrEqual(60);
  expect(lines.filter((l) => l.length > 80)).toEqual([]);
  expect(r.stdout.indexOf('EXAMPLES')).toBeLessThan(r.stdout.indexOf('FLAGS'));
  const link = referenceLink('run');
  expect(r.stdout).toContain(link);
  expect(readFileSync(join(ROOT, PAGE), 'utf8')).toContain(`\n## care-etl run\n`); // the anchor #care-etl-run
  expect(link.endsWith('#care-etl-run')).toBe(true);
});

test('every command: --help fits 80 columns, -h is the same', async () => {
  const { Config } = await import('@oclif/core');
  const config = await Config.load(ROOT);
  const ids = config.commands.map((c) => c.id.split(':'));
  const helps = await Promise.all(ids.map((words) => runCliInProcess([...words, '-h'], { env: { COLUMNS: '80' } })));
  const wide = helps.flatMap((r, i) =>
    r.stdout
      .split('\n')
      .filter((l) => l.length > 80)
      .map((l) => `${ids[i]!.join(' ')}: ${l}`),
  );
  expect(wide).toEqual([]);
  expect(helps.map((r) => r.code)).toEqual(ids.map(() => 0));
});
