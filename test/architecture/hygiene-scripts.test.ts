// The two checks npm test runs on the code's shape fail on a finding (exit 1) and pass on a clean tree.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { repoRoot } from './import-layers.js';

const root = repoRoot();
const temps: string[] = [];
afterAll(() => temps.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** A throw-away project: `files` by relative path, plus the folders unused-exports.mjs scans. */
function project(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'care-etl-hygiene-'));
  temps.push(dir);
  for (const folder of ['src', 'test', 'bench', 'scripts']) mkdirSync(join(dir, folder), { recursive: true });
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

function script(name: string, cwd: string, args: string[] = []) {
  const r = spawnSync(process.execPath, [join(root, 'scripts', name), ...args], { cwd, encoding: 'utf8' });
  return { status: r.status, out: r.stdout + r.stderr };
}

const fn = (name: string, lines: number) => `export function ${name}(): number {\n${'  void 0;\n'.repeat(lines - 3)}  return 1;\n}\n`;

describe('scripts/function-lengths.mjs --limit 100', () => {
  test('a function of 101 lines fails, named with its file and line; one of exactly 100 passes', () => {
    const dir = project({ 'src/long.ts': fn('tooLong', 101), 'src/ok.ts': fn('justFits', 100) });
    const r = script('function-lengths.mjs', dir, ['--limit', '100']);
    expect(r.status).toBe(1);
    expect(r.out).toContain('src/long.ts:1  tooLong');
    expect(r.out).toContain('functions > 100 lines: 1 ');
  });
});

describe('scripts/unused-exports.mjs', () => {
  test('a dead export and a re-export nothing imports through its file fail; a used re-export does not', () => {
    const dir = project({
      'src/b.ts': 'export const used = 1;\nexport const viaFacade = 2;\nexport const nobody = 3;\n',
      'src/facade.ts': "export { viaFacade } from './b.js';\n",
      'src/unread-facade.ts': "export { used } from './b.js';\n",
      'src/c.ts': "import { used } from './b.js';\nimport { viaFacade } from './facade.js';\nexport const sum = () => used + viaFacade;\n",
      'test/c.test.ts': "import { sum } from '../src/c.js';\nsum();\n",
    });
    const r = script('unused-exports.mjs', dir);
    expect(r.status).toBe(1);
    expect(r.out).toContain('dead   src/b.ts  nobody');
    expect(r.out).toContain('dead   src/unread-facade.ts  used (re-export)');
    expect(r.out).not.toContain('src/facade.ts');
    expect(r.out).toContain('\n2 dead');
  });
});
