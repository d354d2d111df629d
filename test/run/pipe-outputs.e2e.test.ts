import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunReport } from '../../src/pipeline/run-report.js';
import { copyTree, ROOT, runCli } from '../helpers/cli.js';

/*
 * Issue 26 item 5: `run --rejects` and `--report`, `plan --out` naming a FIFO or a character device are written in
 * place: the FIFO's reader gets every byte and the node stays what it was (a rename used to put a regular file in
 * its place: the reader got nothing; with /dev/null as root, the system's /dev/null would have been replaced).
 * The example clinic on the embedded sandbox (9 rejects). The device is a private copy of /dev/null made with mknod.
 */

let dir: string;
beforeAll(() => {
  if (!existsSync(join(ROOT, 'dist/commands/run.js'))) throw new Error('dist/ is missing: run `npm run build` first');
  dir = copyTree('examples/clinic', 'care-etl-pipes-');
});

const readers: (() => void)[] = [];
afterAll(() => readers.forEach((stop) => stop()));

/** A FIFO read by `cat` into a regular file while the CLI writes it; resolves with what was read once the writer closes. */
function fifoReader(name: string): Promise<string> {
  expect(spawnSync('mkfifo', ['-m', '644', join(dir, name)]).status).toBe(0);
  const cat = spawn('cat', [name], { cwd: dir, stdio: ['ignore', 'pipe', 'ignore'] });
  readers.push(() => cat.kill('SIGKILL')); // on failure (the FIFO replaced) cat would wait for a writer forever
  let text = '';
  cat.stdout.setEncoding('utf8').on('data', (d: string) => (text += d));
  return new Promise((resolve) => cat.on('close', () => resolve(text)));
}

const kindOf = (name: string) => {
  const st = statSync(join(dir, name));
  return `${st.isFIFO() ? 'fifo' : st.isCharacterDevice() ? 'char device' : 'regular file'} ${(st.mode & 0o777).toString(8)}`;
};

describe('run and plan writing to pipes and devices', () => {
  test('a FIFO as --rejects gets every reject, a FIFO as --report the Markdown report; both stay FIFOs', async () => {
    const rejects = fifoReader('rejects.fifo');
    const report = fifoReader('report.fifo.md');
    const r = await runCli(['run', 'mapping.yaml', '--rejects', 'rejects.fifo', '--report', 'report.fifo.md', '--progress', 'none', '--json'], { cwd: dir });
    expect(r.code, r.stderr).toBe(1); // rows rejected
    expect([kindOf('rejects.fifo'), kindOf('report.fifo.md')]).toEqual(['fifo 644', 'fifo 644']);
    const counted = (JSON.parse(r.stdout) as RunReport).totals.rejected;
    expect(counted).toBe(9);
    const lines = (await rejects).split('\n').filter(Boolean);
    expect(lines).toHaveLength(counted);
    expect(lines.every((l) => typeof (JSON.parse(l) as { mapping?: unknown }).mapping === 'string')).toBe(true);
    // the report does not read the FIFO back (it would wait for a writer forever): it says where the rejects went
    const md = await report;
    expect(md).toContain('care-etl run report');
    expect(md).toContain('rejects.fifo, a pipe or a device');
    // nothing written beside them: no temporary sibling, no summary beside a pipe
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp') || f.includes('summary'))).toEqual([]);
  });

  test('a character device as plan --out stays that device', async (ctx) => {
    if (spawnSync('mknod', [join(dir, 'null-device'), 'c', '1', '3']).status !== 0) ctx.skip(); // no CAP_MKNOD: the classifier's unit test covers devices
    const r = await runCli(['plan', 'mapping.yaml', '--out', 'null-device', '--progress', 'none'], { cwd: dir });
    expect(r.code, r.stderr).not.toBe(2);
    expect(r.code, r.stderr).not.toBe(3);
    expect(kindOf('null-device')).toBe('char device 644');
    expect(readFileSync(join(dir, 'null-device'), 'utf8')).toBe('');
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });
});
