/**
 * Issue 27 item 2, through the built CLI: `care-etl export --format parquet` to a file (0600, renamed when complete)
 * and to a FIFO (Parquet is written front to back: no seek needed), read back by hyparquet; the data dictionary
 * says `format: parquet`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parquetReadObjects } from 'hyparquet';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { cli, envFor, oldObservations, ROOT, TENANT, workDir } from './helpers.js';

let sb: Sandbox;
let dir: string;
beforeAll(async () => {
  if (!existsSync(join(ROOT, 'dist/export/parquet-sink.js'))) throw new Error('dist/ is missing or old: run `npm run build` first');
  sb = await startSandbox({ observationsPerPatient: 0, pageSize: 10 });
  sb.addObservations(TENANT, oldObservations(25));
  dir = workDir();
});
afterAll(async () => {
  await sb?.close();
});

const readRows = async (file: string) => {
  const b = readFileSync(join(dir, file));
  return (await parquetReadObjects({ file: b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer })) as Record<string, unknown>[];
};

describe('care-etl export --format parquet', () => {
  test('to a file (0600) and to a FIFO: the same typed rows; the dictionary names the format', async () => {
    const env = envFor(sb);
    const r = await cli(['export', 'mapping-default.yaml', '--format', 'parquet', '--out', 'obs.parquet', '--dictionary', 'obs.dictionary.json'], {
      cwd: dir,
      env,
    });
    expect(r.stderr).not.toMatch(/error/i);
    expect(r.code).toBe(0);
    expect(statSync(join(dir, 'obs.parquet')).mode & 0o777).toBe(0o600);
    expect(existsSync(join(dir, 'obs.parquet.partial'))).toBe(false);
    const rows = await readRows('obs.parquet');
    expect(rows).toHaveLength(25);
    expect(rows.map((x) => x.value).sort((a, b) => Number(a) - Number(b))).toEqual(Array.from({ length: 25 }, (_, i) => BigInt(i)));
    expect(JSON.parse(readFileSync(join(dir, 'obs.dictionary.json'), 'utf8'))).toMatchObject({ format: 'parquet' });

    const made = spawnSync('mkfifo', ['-m', '600', join(dir, 'fifo')]);
    expect(made.status).toBe(0);
    const cat = spawn('bash', ['-c', 'cat fifo > from-fifo.parquet'], { cwd: dir, stdio: 'ignore' });
    const catDone = new Promise((resolve) => cat.on('close', resolve));
    const f = await cli(['export', 'mapping-default.yaml', '--format', 'parquet', '--out', 'fifo'], { cwd: dir, env });
    expect(f.code).toBe(0);
    expect(await catDone).toBe(0);
    expect(statSync(join(dir, 'fifo')).isFIFO()).toBe(true);
    expect(await readRows('from-fifo.parquet')).toEqual(rows);
  });
});
