import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { envFor, oldObservations, parseCsv, ROOT, TENANT, workDir } from './helpers.js';

/*
 * Issue 26 item 5: `care-etl export mapping.yaml --out - | gzip` and `--out >(gzip > x.gz)` give the same rows as a
 * file export; a FIFO or a character device as `--out` / `--dictionary` is written in place (never replaced by a
 * regular file, never chmod-ed). Devices: a private copy of /dev/null made with mknod (skipped without CAP_MKNOD; the
 * path classifier's unit test covers them). The shell is bash, as a user's; the rows are read back with csv-parse.
 */

beforeAll(() => {
  if (!existsSync(join(ROOT, 'dist/commands/export.js'))) throw new Error('dist/ is missing: run `npm run build` first');
});

let sb: Sandbox;
let dir: string;
beforeAll(async () => {
  sb = await startSandbox({ observationsPerPatient: 0, pageSize: 10 });
  sb.addObservations(TENANT, oldObservations(25));
  dir = workDir();
});
afterAll(async () => {
  await sb.close();
});

const BIN = join(ROOT, 'bin/run.js');

/** Runs a bash script in the work folder; `care` is the built CLI. */
function bash(script: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', `set -eo pipefail\ncare() { "$NODE" "$BIN" "$@"; }\n${script}`], {
      cwd: dir,
      env: { ...envFor(sb), NODE: process.execPath, BIN },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The rows of a gzip-ed CSV export. */
const gunzipRows = (file: string) => parseCsv(gunzipSync(readFileSync(join(dir, file))).toString('utf8'));

/** A FIFO read by `cat` into `into` while the CLI writes it (the reader must be there for the writer's open). */
function fifoReader(name: string, into: string): { done: Promise<number | null>; stop: () => void } {
  const made = spawnSync('mkfifo', ['-m', '644', join(dir, name)]);
  if (made.status !== 0) throw new Error(`mkfifo: ${made.stderr.toString()}`);
  const cat = spawn('bash', ['-c', `cat "${name}" > "${into}"`], { cwd: dir, stdio: 'ignore' });
  return { done: new Promise((resolve) => cat.on('close', resolve)), stop: () => cat.kill('SIGKILL') };
}

describe('export to pipes and devices', () => {
  test('`--out - | gzip` and `--out >(gzip > x.gz)` give the same rows as a file export', async () => {
    const file = await bash('care export mapping-default.yaml --out obs.csv');
    expect(file.code, file.stderr).toBe(0);
    const expected = parseCsv(readFileSync(join(dir, 'obs.csv'), 'utf8'));
    expect(expected).toHaveLength(25);

    const piped = await bash('care export mapping-default.yaml --out - | gzip > piped.csv.gz');
    expect(piped.code, piped.stderr).toBe(0);
    expect(piped.stderr).toContain('Exported 25 rows'); // messages on stderr, rows on stdout
    expect(gunzipRows('piped.csv.gz')).toEqual(expected);

    // `wait $!` waits for the process substitution: gzip has written all of x.gz
    const substituted = await bash('care export mapping-default.yaml --out >(gzip > substituted.csv.gz); wait $!');
    expect(substituted.code, substituted.stderr).toBe(0);
    expect(substituted.stderr).toMatch(/Exported 25 rows .* to \/dev\/fd\/\d+/);
    expect(gunzipRows('substituted.csv.gz')).toEqual(expected);
    expect(readdirSync(dir).filter((f) => f.endsWith('.partial'))).toEqual([]);
  });

  test('a FIFO as --out gets every row and stays a FIFO (mode untouched); a character device as --dictionary stays that device', async () => {
    const out = fifoReader('obs.fifo', 'obs-from-fifo.csv');
    // a private copy of /dev/null (mknod as root): the real one is never a target here
    const device = spawnSync('mknod', [join(dir, 'null-device'), 'c', '1', '3']).status === 0;
    try {
      const r = await bash(`care export mapping-default.yaml --out obs.fifo${device ? ' --dictionary null-device' : ''}`);
      expect(r.code, r.stderr).toBe(0);
      expect(statSync(join(dir, 'obs.fifo')).isFIFO(), 'obs.fifo replaced by a regular file').toBe(true);
      expect(statSync(join(dir, 'obs.fifo')).mode & 0o777).toBe(0o644);
      await out.done;
      expect(parseCsv(readFileSync(join(dir, 'obs-from-fifo.csv'), 'utf8'))).toHaveLength(25);
      if (device) expect(statSync(join(dir, 'null-device')).isCharacterDevice(), 'null-device replaced by a regular file').toBe(true);
      expect(readdirSync(dir).filter((f) => f.endsWith('.tmp') || f.endsWith('.partial'))).toEqual([]);
    } finally {
      out.stop();
    }
  });
});
