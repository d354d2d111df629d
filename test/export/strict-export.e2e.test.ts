/**
 * Issue 13, done-when: ≥ 1,000 observations whose questionnaire texts hold LF, CR, CRLF, tabs, quotes and
 * formula prefixes (the sandbox's own generator), exported by the built CLI and read back by Python's `csv`
 * module with `strict=True` (not csv-parse): every record parses, has the header's field count, and every text
 * round-trips exactly — after the documented formula escape (a leading `'`), or verbatim with
 * `--no-escape-formulas`.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_COLUMNS } from '../../src/export/default-columns.js';
import { makeObservation } from '../../src/sandbox/observations.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { cliInProcess, envFor, TENANT, workDir } from './helpers.js';

const PYTHON = spawnSync('python3', ['-c', 'import csv'], { encoding: 'utf8' }).status === 0 ? 'python3' : undefined;
const N = 1_000;
let sb: Sandbox;
const texts = new Map<string, string>();

beforeAll(async () => {
  sb = await startSandbox({ observationsPerPatient: 0, pageSize: 200 });
  const obs = Array.from({ length: N }, (_, i) => ({ ...makeObservation(7, `p${i % 100}`, Math.floor(i / 100), `p${i % 100}`), id: `obs-${i}` }));
  for (const o of obs) texts.set(o.id, ((o as Record<string, unknown>).code as { text: string }).text);
  sb.addObservations(TENANT, obs);
});
afterAll(async () => {
  await sb.close();
});

function readStrict(file: string): string[][] {
  const script =
    "import csv, json, sys\nwith open(sys.argv[1], newline='', encoding='utf-8-sig') as f:\n    print(json.dumps([r for r in csv.reader(f, strict=True)]))";
  const r = spawnSync(PYTHON!, ['-c', script, file], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`python csv (strict) refused ${file}: ${r.stderr}`);
  return JSON.parse(r.stdout) as string[][];
}

describe.skipIf(!PYTHON)('an exported CSV of hostile questionnaire texts, read by a strict reader', () => {
  it('has one well-formed record per observation, texts exact after the formula escape', async () => {
    expect([...texts.values()].filter((t) => /[\r\n]/.test(t)).length).toBeGreaterThan(100);
    for (const escape of [true, false]) {
      const dir = workDir();
      const r = await cliInProcess(['export', 'mapping-default.yaml', '--out', 'obs.csv', '--bom', ...(escape ? [] : ['--no-escape-formulas'])], {
        cwd: dir,
        env: envFor(sb),
      });
      expect(r.code, r.stderr).toBe(0);
      const [header, ...records] = readStrict(join(dir, 'obs.csv'));
      expect(header).toEqual([...DEFAULT_COLUMNS]);
      expect(records).toHaveLength(N);
      const id = header!.indexOf('id');
      const q = header!.indexOf('questionnaire');
      for (const rec of records) {
        expect(rec).toHaveLength(header!.length);
        const text = texts.get(rec[id]!)!;
        expect(rec[q]).toBe(escape && /^[=+\-@\t\r]/.test(text) ? `'${text}` : text);
      }
    }
  }, 120_000);
});
