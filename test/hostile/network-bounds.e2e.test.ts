/**
 * Issue 12 (network half), through the built CLI: against each hostile server (test/helpers/hostile-server.ts,
 * 127.0.0.1), `care-etl run` and `care-etl export` END — with small bounds given as flags — with the exit code
 * of the README's table: 3 when the server cannot be read (a body trickling past --timeout, an answer past
 * --max-response-bytes, next links past --max-pages or not progressing); for create answers that cannot be
 * believed, the rows are reconciled (exit 0) or rejected and left pending (exit 1), and the ledger never holds
 * a synced entry without a valid id. No timing is asserted: the test's own time-out bounds each case.
 * The cases run side by side (each has its own server and folder): most of their time is waiting on time-outs.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isSafeId } from '../../src/api/errors.js';
import { Ledger } from '../../src/state/ledger.js';
import { runCli, type CliResult } from '../helpers/cli.js';
import { startHostileServer, type HostileMode, type HostileModeServer } from '../helpers/hostile-server.js';
import { makeClinic } from '../sync/helpers.js';

const KEY = 'sk-hostile-CANARY-77a1';
const TENANT = 't-hostile';
const CASE_MS = 60_000;
const CLI_MS = 45_000; // a run still going then is killed: code null, the case fails

const servers: HostileModeServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});
async function serve(mode: HostileMode): Promise<HostileModeServer> {
  const s = await startHostileServer(mode);
  servers.push(s);
  return s;
}

const target = (url: string) => ['--base-url', url, '--emr-id', 'emr', '--tenant-id', TENANT];

/** The `--json` error envelope on stdout. */
function envelope(r: CliResult): { error: { name: string; message: string }; exitCode: number } {
  return JSON.parse(r.stdout) as { error: { name: string; message: string }; exitCode: number };
}

function expectNoKey(r: CliResult): void {
  expect(r.stdout).not.toContain(KEY);
  expect(r.stderr).not.toContain(KEY);
}

async function run(url: string, bounds: string[]): Promise<{ r: CliResult; dir: string; state: string }> {
  const clinic = makeClinic(4, 2, 'care-etl-hostile-');
  const r = await runCli(['run', clinic.mapping, ...target(url), ...bounds, '--json', '--progress', 'none'], { env: { CARE_API_KEY: KEY }, timeoutMs: CLI_MS });
  expectNoKey(r);
  return { r, dir: clinic.dir, state: clinic.state };
}

async function exportTo(url: string, bounds: string[]): Promise<{ r: CliResult; out: string; dir: string }> {
  const clinic = makeClinic(1, 1, 'care-etl-hostile-x-');
  const out = join(clinic.dir, 'observations.csv');
  const r = await runCli(['export', clinic.mapping, ...target(url), ...bounds, '--out', out, '--json', '--progress', 'none'], {
    env: { CARE_API_KEY: KEY },
    timeoutMs: CLI_MS,
  });
  expectNoKey(r);
  return { r, out, dir: clinic.dir };
}

/** A failed export leaves neither the output nor its partial file. */
function expectNoOutput(out: string, dir: string): void {
  expect(existsSync(out)).toBe(false);
  expect(readdirSync(dir).filter((f) => f.includes('.partial'))).toEqual([]);
}

interface Case {
  name: string;
  mode: HostileMode;
  bounds: string[];
  message: RegExp;
}

const UNREADABLE: Case[] = [
  {
    name: 'a body trickling a byte every 20 ms, --timeout 300',
    mode: { kind: 'slow-body', byteEveryMs: 20 },
    bounds: ['--timeout', '300'],
    message: /no complete answer within 300 ms/,
  },
  {
    name: 'a body that never ends, --max-response-bytes 65536',
    mode: { kind: 'endless-body' },
    bounds: ['--max-response-bytes', '65536'],
    message: /larger than 65536 bytes \(--max-response-bytes\)/,
  },
  {
    name: 'new next links with new resources forever, --max-pages 25',
    mode: { kind: 'endless-next', entries: 'fresh' },
    bounds: ['--max-pages', '25'],
    message: /past 25 pages \(--max-pages\)/,
  },
  { name: 'new next links to empty pages forever', mode: { kind: 'endless-next', entries: 'empty' }, bounds: [], message: /next links do not progress/ },
  { name: 'new next links to the same resource forever', mode: { kind: 'endless-next', entries: 'same' }, bounds: [], message: /next links do not progress/ },
];

describe.concurrent('a server that cannot be read: the command ends with exit 3', () => {
  for (const c of UNREADABLE) {
    it(
      `run: ${c.name}`,
      async () => {
        const s = await serve(c.mode);
        const { r } = await run(s.url, c.bounds);
        expect(r.code, r.stderr).toBe(3);
        const e = envelope(r);
        expect(e.exitCode).toBe(3);
        expect(e.error.message).toMatch(c.message);
      },
      CASE_MS,
    );

    it(
      `export: ${c.name}`,
      async () => {
        const s = await serve(c.mode);
        const { r, out, dir } = await exportTo(s.url, c.bounds);
        expect(r.code, r.stderr).toBe(3);
        expect(envelope(r).error.message).toMatch(c.message);
        expectNoOutput(out, dir);
      },
      CASE_MS,
    );
  }
});

function ledgerEntries(state: string, url: string) {
  const ledger = Ledger.open(state);
  try {
    const scope = ledger.scope(url, TENANT);
    return ['patient', 'practitioner', 'careteam'].flatMap((m) => [...scope.entries(m)]);
  } finally {
    ledger.close();
  }
}

describe.concurrent('create answers that cannot be believed (run): never a synced entry without a valid id', () => {
  for (const answer of ['no-id', 'unsafe-id', 'wrong-type', 'same-id'] as const) {
    it(
      `${answer}, the server lists nothing: rows rejected as outcome-unknown, keys pending (exit 1)`,
      async () => {
        const s = await serve({ kind: 'create-answer', answer, listed: 'none' });
        const { r, dir, state } = await run(s.url, []);
        expect(r.code, r.stderr).toBe(1);
        const entries = ledgerEntries(state, s.url);
        const synced = entries.filter((e) => e.status === 'synced');
        for (const e of synced) expect(isSafeId(e.serverId)).toBe(true);
        expect(new Set(synced.map((e) => `${e.resourceType}/${e.serverId}`)).size).toBe(synced.length);
        // same-id: the first Patient's and Practitioner's answer (`same-1`) was believed, but the listing after the
        // phase lacks it: left pending too (created-id-missing).
        expect(synced.length).toBe(0);
        const rejects = readFileSync(join(dir, '.care-etl', 'rejects.ndjson'), 'utf8');
        expect(rejects).toContain('outcome-unknown');
        if (answer === 'same-id') expect(rejects).toContain('created-id-missing');
      },
      CASE_MS,
    );
  }

  it(
    'no-id, the server lists what it stored: every key reconciled to the id the server listed (exit 0)',
    async () => {
      const s = await serve({ kind: 'create-answer', answer: 'no-id', listed: 'stored' });
      const { r, state } = await run(s.url, []);
      expect(r.code, r.stderr).toBe(0);
      const entries = ledgerEntries(state, s.url);
      expect(entries).toHaveLength(4 + 2 + 4);
      for (const e of entries) {
        expect(e.status).toBe('synced');
        expect(s.stored(e.resourceType).some((x) => x.id === e.serverId)).toBe(true);
      }
      expect(s.stored('Patient')).toHaveLength(4);
    },
    CASE_MS,
  );
});
