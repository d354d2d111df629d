/**
 * The live display in a real terminal: tmux (Debian's; `.ci/run` installs it) at 80 and 120 columns runs the built
 * CLI on the example clinic against a sandbox with latency, and the pane is captured (without -J, so wrapping
 * shows) while the bars move and after the run: no line wider than the terminal, a bar during the run, every
 * reject reason readable whole afterwards, one verdict line.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import stringWidth from 'string-width';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeReject } from '../../src/pipeline/rejects.js';
import type { RejectRecord } from '../../src/transform/reject-record.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { BIN, copyTree } from '../helpers/cli.js';

const SOCKET = `care-etl-term-${process.pid}`;
const tmux = (...args: string[]) => execFileSync('tmux', ['-L', SOCKET, ...args], { encoding: 'utf8' });
const capture = (session: string) => tmux('capture-pane', '-p', '-t', session, '-S', '-', '-E', '-').replace(/\n+$/, '').split('\n');
const squash = (s: string) => s.replace(/\s+/g, '');

let sb: Sandbox;

beforeAll(async () => {
  if (spawnSync('tmux', ['-V']).status !== 0) throw new Error('tmux is missing: install tmux (.ci/run does; Debian: apt-get install tmux)');
  // Latency and a fixed concurrency: the run takes a few seconds, so the bars can be seen while they move.
  sb = await startSandbox({ faults: { latencyMs: 20 } });
});
afterAll(async () => {
  spawnSync('tmux', ['-L', SOCKET, 'kill-server']);
  await sb?.close();
});

async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const got = probe();
    if (got !== undefined) return got;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 40));
  }
}

const BAR = /\[[█░]+\]/;

// Both widths at once (own session, tenant and folder each): the time is in the CLI's start and the latency.
it.concurrent.each([
  [80, 'demo-clinic'],
  [120, 'other-clinic'],
])('under tmux at %i columns: every line fits, bars while running, each reject whole after them, one verdict', async (cols, tenant) => {
  const dir = copyTree('examples/clinic');
  const session = `w${cols}`;
  const env = `CARE_BASE_URL=${sb.url} CARE_API_KEY=${sb.credentials.apiKey} CARE_EMR_ID=${sb.credentials.emrId} CARE_TENANT_ID=${tenant}`;
  const cmd = `cd ${dir} && env -u NO_COLOR -u FORCE_COLOR -u CI ${env} ${process.execPath} ${BIN} run mapping.yaml --concurrency 2; echo "EXIT=$?"; sleep 60`;
  tmux('new-session', '-d', '-x', String(cols), '-y', '30', '-s', session, cmd);

  const during = await until('a bar', () => {
    const lines = capture(session);
    if (lines.some((l) => l.startsWith('EXIT='))) throw new Error(`the run ended before a bar was seen:\n${lines.join('\n')}`);
    return lines.some((l) => BAR.test(l)) ? lines : undefined;
  });
  const after = await until('the end of the run', () => {
    const lines = capture(session);
    return lines.some((l) => l.startsWith('EXIT=')) ? lines : undefined;
  });

  for (const l of [...during, ...after]) expect(stringWidth(l), l).toBeLessThanOrEqual(cols);
  expect(after.find((l) => l.startsWith('EXIT='))).toBe('EXIT=1');
  // One bar per mapping, drawn once (not duplicated by redraws).
  for (const m of ['patient', 'practitioner', 'careteam']) expect(after.filter((l) => BAR.test(l) && l.includes(` ${m} `))).toHaveLength(1);
  expect(after.filter((l) => l.startsWith('Run complete:'))).toHaveLength(1);
  expect(after.join('\n')).not.toContain('Listed '); // index listings: --verbose only

  const rejects = readFileSync(join(dir, '.care-etl', 'rejects.ndjson'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as RejectRecord);
  expect(rejects).toHaveLength(9);
  const start = after.findIndex((l) => l.startsWith('Rejected rows (9):'));
  expect(start, after.join('\n')).toBeGreaterThan(after.findLastIndex((l) => BAR.test(l)));
  const listed = squash(after.slice(start).join(''));
  // Paths as the CLI prints them: relative to its working folder (the clinic's).
  const cwd = process.cwd();
  process.chdir(dir);
  const reasons = rejects.map((r) => describeReject(r));
  process.chdir(cwd);
  for (const reason of reasons) expect(listed).toContain(squash(reason));
});
