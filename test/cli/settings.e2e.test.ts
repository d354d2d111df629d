/**
 * Settings that fail loudly (issue 25, item 5), through the built CLI spawned with node as the installed bin is:
 * `--dotenv` (Node 20 reads `--env-file` itself, anywhere on the command line), `.env` lines that are not KEY=value;
 * proxy credentials (item 4) absent from every output and file when a proxy echoes the request headers.
 */
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { copyTree, ROOT, runCli, runCliInProcess } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'care-etl-settings-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const MAPPING = join(ROOT, 'examples', 'clinic', 'mapping.yaml');

describe.concurrent('--dotenv (alias --env-file)', () => {
  it("a missing --dotenv file: exit 2 with care-etl's message, nothing else done", async () => {
    const r = await runCliInProcess(['validate', MAPPING, '--dotenv', join(dir, 'missing.env')], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`The env file ${join(dir, 'missing.env')} does not exist`);
    expect(r.stderr).not.toContain('node:');
  });

  it('--env-file naming an existing file still works (alias): its variables reach the mapping', async () => {
    writeFileSync(join(dir, 'bad-url.env'), 'CARE_BASE_URL=not a url\n');
    const r = await runCliInProcess(['plan', MAPPING, '--env-file', join(dir, 'bad-url.env')], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--base-url');
  });

  it('a .env line with an unterminated quote: exit 2 naming the file and line, never the value', async () => {
    writeFileSync(join(dir, 'quote.env'), '# settings\nCARE_API_KEY="sk-SECRET-canary\nCARE_EMR_ID=e\n');
    const r = await runCliInProcess(['validate', MAPPING, '--dotenv', join(dir, 'quote.env')], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${join(dir, 'quote.env')}:2`);
    expect(r.stderr).toContain('never closed');
    expect(r.stdout + r.stderr).not.toContain('SECRET-canary');
  });
});

/** Every file under `dir` (state.db, rejects, summary, report…) as latin1 text. */
function filesUnder(root: string): { path: string; text: string }[] {
  return readdirSync(root, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => ({ path: join(e.parentPath, e.name), text: readFileSync(join(e.parentPath, e.name)).toString('latin1') }));
}

describe.concurrent('proxy credentials through the CLI', () => {
  const USER = 'etl-proxy-user';
  const PASSWORD = 'Pr0xyCANARY-pass';
  const BASIC = Buffer.from(`${USER}:${PASSWORD}`).toString('base64');

  /** A forward proxy answering itself: CONNECT 407 echoing the headers; listings empty, every create 422 with diagnostics echoing the request headers. */
  async function echoingProxy(): Promise<{ url: string; close: () => Promise<void> }> {
    const server = http.createServer((req, res) => {
      const echo = JSON.stringify(req.headers);
      if (req.method === 'GET') res.writeHead(200, { 'content-type': 'application/json' }).end('{"resourceType":"Bundle","type":"searchset","entry":[]}');
      else {
        const outcome = {
          resourceType: 'OperationOutcome',
          issue: [{ severity: 'error', code: 'invalid', diagnostics: `rejected; headers ${echo}; auth ${req.headers['proxy-authorization']}` }],
        };
        req.resume().on('end', () => res.writeHead(422, { 'content-type': 'application/json' }).end(JSON.stringify(outcome)));
      }
    });
    server.on('connect', (req, socket) => {
      const body = `no tunnel for you: ${JSON.stringify(req.headers)}`;
      socket.end(`HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return {
      url: `http://${USER}:${PASSWORD}@127.0.0.1:${(server.address() as AddressInfo).port}`,
      close: () => new Promise((r) => server.close(() => r())),
    };
  }

  it('a proxy echoing Proxy-Authorization in its answers: stderr, rejects, summary, report and ledger hold no form of user:password', async () => {
    const proxy = await echoingProxy();
    const work = copyTree('examples/clinic', 'care-etl-proxy-');
    try {
      const env = { HTTP_PROXY: proxy.url, CARE_API_KEY: 'api-key-for-proxy-test', CARE_EMR_ID: 'emr', CARE_TENANT_ID: 't' };
      const r = await runCliInProcess(
        ['run', join(work, 'mapping.yaml'), '--base-url', 'http://care-api.test/api', '--allow-insecure', '--report', join(work, 'report.html')],
        {
          env,
          cwd: work,
        },
      );
      expect(r.code).toBe(1);
      const files = filesUnder(work).filter((f) => !f.path.includes(`${join(work, 'data')}`));
      expect(files.map((f) => f.path)).toEqual(expect.arrayContaining([expect.stringMatching(/rejects\.ndjson$/), expect.stringMatching(/state\.db$/)]));
      expect(files.find((f) => f.path.endsWith('rejects.ndjson'))!.text).toContain('[redacted]');
      for (const where of [{ path: 'stdout+stderr', text: r.stdout + r.stderr }, ...files]) {
        for (const form of [PASSWORD, BASIC]) expect(where.text.includes(form), `${form} in ${where.path}`).toBe(false);
      }
    } finally {
      await proxy.close();
      rmSync(work, { recursive: true, force: true });
    }
  });

  it('a CONNECT answered 407: exit 2, the proxy named (not the server), no "bug" hint, no credentials', async () => {
    const proxy = await echoingProxy();
    const work = copyTree('examples/clinic', 'care-etl-proxy-');
    try {
      const env = { HTTPS_PROXY: proxy.url, CARE_API_KEY: 'api-key-for-proxy-test', CARE_EMR_ID: 'emr', CARE_TENANT_ID: 't' };
      const r = await runCliInProcess(['run', join(work, 'mapping.yaml'), '--base-url', 'https://care-api.test/api'], { env, cwd: work });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/the proxy 127\.0\.0\.1:\d+ \(HTTPS_PROXY\) refused the credentials \(407/);
      expect(r.stderr).not.toMatch(/bug|did not answer in time/);
      for (const form of [PASSWORD, BASIC]) expect(r.stdout + r.stderr).not.toContain(form);
    } finally {
      await proxy.close();
      rmSync(work, { recursive: true, force: true });
    }
  });
});

describe('a FIFO read by two mappings', () => {
  const MAP = (from: string) => `'{ "identifier": [{ "system": "urn:${from}", "value": MRN }] }'`;
  it('one source or two naming the same pipe: refused at the path by validate and run (exit 2), nothing hangs', async () => {
    const fifoDir = mkdtempSync(join(tmpdir(), 'care-etl-fifo-'));
    try {
      expect(spawnSync('mkfifo', [join(fifoDir, 'rows.pipe')]).status).toBe(0);
      writeFileSync(
        join(fifoDir, 'one.yaml'),
        `version: 1\nsources:\n  p: { path: rows.pipe, format: csv }\nresources:\n  - { name: a, type: Patient, from: p, key: MRN, map: ${MAP('a')} }\n  - { name: b, type: Practitioner, from: p, key: MRN, map: ${MAP('b')} }\n`,
      );
      writeFileSync(
        join(fifoDir, 'two.yaml'),
        `version: 1\nsources:\n  p: { path: rows.pipe, format: csv }\n  q: { path: ./rows.pipe, format: csv }\nresources:\n  - { name: a, type: Patient, from: p, key: MRN, map: ${MAP('a')} }\n  - { name: b, type: Practitioner, from: q, key: MRN, map: ${MAP('b')} }\n`,
      );
      const runs = await Promise.all([
        runCli(['validate', 'one.yaml'], { cwd: fifoDir, timeoutMs: 20_000 }),
        runCli(['run', 'two.yaml', '--sandbox'], { cwd: fifoDir, timeoutMs: 20_000 }),
      ]);
      for (const r of runs) {
        expect(r.code).toBe(2);
        expect(r.stderr).toMatch(/:3:14: error \[source-shared-fifo\]/);
      }
      expect(runs[0]!.stderr).toContain('source `p` is a FIFO (named pipe) read by 2 mappings (`a`, `b`)');
      expect(runs[1]!.stderr).toContain('sources `p`, `q` name one FIFO (named pipe) read by 2 mappings');
    } finally {
      rmSync(fifoDir, { recursive: true, force: true });
    }
  });
});
