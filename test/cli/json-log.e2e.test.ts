import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { copyTree, runCliInProcess } from '../helpers/cli.js';

type Line = { ts: string; level: string; event: string } & Record<string, unknown>;
const lines = (stderr: string): Line[] =>
  stderr
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as Line);

describe('--log-format json', () => {
  it('run: stderr is JSON lines only — target, phases, listings, progress, every reject, requests (--verbose), warnings, the verdict last; no cell value', async () => {
    const dir = copyTree('examples/clinic');
    const r = await runCliInProcess(['run', 'mapping.yaml', '--log-format', 'json', '--verbose', '--fail-on-rejects', '50%'], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    const log = lines(r.stderr); // throws on any line that is not JSON
    for (const l of log) {
      expect(new Date(l.ts).toISOString()).toBe(l.ts);
      expect(['debug', 'info', 'warn', 'error']).toContain(l.level);
    }
    const events = new Set(log.map((l) => l.event));
    for (const e of ['target', 'phase', 'listing', 'progress', 'reject', 'request', 'warning', 'verdict']) expect(events, e).toContain(e);
    expect(log.at(-1)).toMatchObject({ event: 'verdict', command: 'run', exitCode: 0, failOnRejects: '50%', totals: { read: 90, rejected: 9 } });
    const rejects = log.filter((l) => l.event === 'reject');
    expect(rejects).toHaveLength(9);
    expect(rejects.find((l) => l.line === 33)).toMatchObject({ mapping: 'patient', stage: 'transform', key: '000031', file: join(dir, 'data/patients.csv') });
    for (const q of log.filter((l) => l.event === 'request')) {
      expect(Object.keys(q).sort()).toEqual(['event', 'level', 'method', 'ms', 'status', 'ts', 'type']);
      expect(['Patient', 'Practitioner', 'CareTeam', undefined]).toContain(q.type);
    }
    // No cell of the exports (keys aside) reaches the log.
    const cells = readFileSync(join(dir, 'data/patients.csv'), 'utf8')
      .split('\n')
      .slice(1)
      .flatMap((row) => row.split(',').slice(1))
      .filter((c) => c.length >= 5);
    expect(cells.length).toBeGreaterThan(100);
    for (const c of cells) expect(r.stderr, c).not.toContain(c);
  });

  it('a usage error is a JSON error line and a verdict (exit 2), the API key never in it', async () => {
    const r = await runCliInProcess(['run', 'no-such-mapping.yaml', '--log-format', 'json', '--api-key', 'sekret-api-key-4711']);
    expect(r.code).toBe(2);
    const log = lines(r.stderr);
    expect(log.map((l) => l.event)).toEqual(['error', 'verdict']);
    expect(log[0]).toMatchObject({ level: 'error', exitCode: 2 });
    expect(log[1]).toMatchObject({ exitCode: 2 });
    expect(r.stderr + r.stdout).not.toContain('sekret-api-key-4711');
  });
});
