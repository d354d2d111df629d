/**
 * HTTPS_PROXY / HTTP_PROXY / NO_PROXY: the client's own dispatcher goes through a proxy when the variables say
 * so. A tiny forward proxy on 127.0.0.1 (absolute-URI requests, as proxies receive plain http) counts requests
 * and forwards them to the sandbox on 127.0.0.1. No traffic leaves loopback: the target name `care-api.test` is
 * only ever resolved by the proxy (which maps it to the sandbox) or, for the direct NO_PROXY case, by a stubbed
 * `dns.lookup` that knows that name and `localhost` and nothing else.
 */
import dns from 'node:dns';
import http from 'node:http';
import { isIP, type AddressInfo } from 'node:net';
import { Agent, EnvHttpProxyAgent } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CareClient, createDispatcher } from '../../src/api/client.js';
import { resolveConnection, type ConnectionInput } from '../../src/api/connection.js';
import { TransportError } from '../../src/api/errors.js';
import { CareEtlError } from '../../src/core/issues.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';

const API_KEY = 'proxy-test-key';
const TARGET_NAME = 'care-api.test';
const VARS = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'NO_PROXY', 'no_proxy'];

let sandbox: Sandbox;
let sandboxPort: number;
let proxy: http.Server;
let proxyUrl: string;
const seen: string[] = [];
let connects = 0;

const savedEnv: Record<string, string | undefined> = {};
const realLookup = dns.lookup;
const lookups: string[] = [];

beforeAll(async () => {
  sandbox = await startSandbox({ apiKey: API_KEY, emrId: 'emr-1', tenants: ['clinic-a'] });
  sandboxPort = Number(new URL(sandbox.url).port);
  proxy = http.createServer((req, res) => {
    seen.push(req.url ?? '');
    let target: URL;
    try {
      target = new URL(req.url ?? '');
    } catch {
      res.writeHead(400).end('expected an absolute-URI request');
      return;
    }
    if (target.pathname.endsWith('/hang')) return; // never answers: the client's time-out must fire
    const upstream = http.request(
      { host: '127.0.0.1', port: sandboxPort, method: req.method, path: `${target.pathname}${target.search}`, headers: req.headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on('error', () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  proxy.on('connect', (_req, socket) => {
    connects++;
    socket.end('HTTP/1.1 405 Method Not Allowed\r\n\r\n');
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});
afterAll(async () => {
  proxy.closeAllConnections();
  await new Promise((r) => proxy.close(r));
  await sandbox.close();
});

beforeEach(() => {
  for (const k of VARS) {
    savedEnv[k] = process.env[k];
    delete process.env[k];
  }
  seen.length = 0;
  connects = 0;
  lookups.length = 0;
  // Only TARGET_NAME, localhost and IP literals resolve (to themselves or 127.0.0.1); anything else fails without asking a DNS server.
  (dns as { lookup: unknown }).lookup = (hostname: string, options: unknown, callback?: unknown) => {
    const cb = (typeof options === 'function' ? options : callback) as (...a: unknown[]) => void;
    const all = typeof options === 'object' && options !== null && (options as { all?: boolean }).all;
    lookups.push(hostname);
    const address = hostname === TARGET_NAME || hostname === 'localhost' ? '127.0.0.1' : isIP(hostname) ? hostname : undefined;
    if (!address) return process.nextTick(cb, Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', hostname }));
    const family = isIP(address);
    process.nextTick(() => (all ? cb(null, [{ address, family }]) : cb(null, address, family)));
  };
});
afterEach(() => {
  (dns as { lookup: unknown }).lookup = realLookup;
  for (const k of VARS) {
    if (savedEnv[k] === undefined) delete process.env[k];
    else process.env[k] = savedEnv[k];
  }
});

function client(baseUrl: string, over: ConnectionInput = {}): CareClient {
  return new CareClient(
    resolveConnection(over, { baseUrl, apiKey: API_KEY, emrId: 'emr-1', tenantId: 'clinic-a', allowInsecure: true, requestTimeoutMs: 2_000 }),
    { retry: false },
  );
}

/** One create and one read through a fresh client (its dispatcher reads the variables when it is made). */
async function roundTrip(baseUrl: string): Promise<void> {
  const c = client(baseUrl);
  try {
    const p = await c.create('Patient', {
      resourceType: 'Patient',
      identifier: [{ system: 'urn:mrn', value: `P-${seen.length}-${Date.now()}` }],
      active: true,
    });
    expect((await c.get('Patient', p.id)).id).toBe(p.id);
  } finally {
    await c.close();
  }
}

describe('proxy variables', () => {
  it('HTTP_PROXY set: plain-http requests go through the proxy as absolute-URI requests (never resolving the target)', async () => {
    process.env.HTTP_PROXY = proxyUrl;
    await roundTrip(`http://${TARGET_NAME}:${sandboxPort}`);
    expect(seen).toHaveLength(2);
    expect(seen[0]).toBe(`http://${TARGET_NAME}:${sandboxPort}/Patient`);
    expect(seen[1]).toMatch(new RegExp(`^http://${TARGET_NAME}:${sandboxPort}/Patient/`));
    expect(connects).toBe(0);
    expect(lookups).not.toContain(TARGET_NAME);
  });

  it('lower-case http_proxy is honoured too', async () => {
    process.env.http_proxy = proxyUrl;
    await roundTrip(`http://${TARGET_NAME}:${sandboxPort}/`);
    expect(seen).toHaveLength(2);
  });

  it('NO_PROXY matching the target (name, .suffix or host:port): direct connection, the proxy sees nothing', async () => {
    process.env.HTTP_PROXY = proxyUrl;
    for (const noProxy of [TARGET_NAME, '.test', `other.example, ${TARGET_NAME}:${sandboxPort}`]) {
      process.env.NO_PROXY = noProxy;
      lookups.length = 0;
      await roundTrip(`http://${TARGET_NAME}:${sandboxPort}`);
      expect(lookups).toContain(TARGET_NAME);
    }
    expect(seen).toEqual([]);
  });

  it('NO_PROXY naming another port of the target does not bypass the proxy', async () => {
    process.env.HTTP_PROXY = proxyUrl;
    process.env.NO_PROXY = `${TARGET_NAME}:${sandboxPort + 1}`;
    await roundTrip(`http://${TARGET_NAME}:${sandboxPort}`);
    expect(seen).toHaveLength(2);
  });

  it('loopback targets (the embedded sandbox) are never proxied, even when NO_PROXY does not name them', async () => {
    process.env.HTTP_PROXY = proxyUrl;
    process.env.HTTPS_PROXY = proxyUrl;
    await roundTrip(sandbox.url);
    await roundTrip(sandbox.url.replace('127.0.0.1', 'localhost'));
    process.env.NO_PROXY = '.clinic.example';
    await roundTrip(sandbox.url);
    expect(seen).toEqual([]);
    expect(connects).toBe(0);
  });

  it('HTTPS_PROXY alone does not proxy plain http; NO_PROXY=* turns proxying off', async () => {
    process.env.HTTPS_PROXY = proxyUrl;
    await roundTrip(`http://${TARGET_NAME}:${sandboxPort}`);
    process.env.HTTP_PROXY = proxyUrl;
    process.env.NO_PROXY = '*';
    await roundTrip(`http://${TARGET_NAME}:${sandboxPort}`);
    expect(seen).toEqual([]);
  });

  it('the request time-out still applies through the proxy', async () => {
    process.env.HTTP_PROXY = proxyUrl;
    const c = client(`http://${TARGET_NAME}:${sandboxPort}`, { requestTimeoutMs: 300 });
    const started = Date.now();
    try {
      const err = await c.get('Patient', 'hang').then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(TransportError);
      expect((err as TransportError).failure).toBe('timeout');
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await c.close();
    }
    expect(seen).toEqual([`http://${TARGET_NAME}:${sandboxPort}/Patient/hang`]);
  });

  it('a proxy given without scheme (host:port) is read as http://host:port', async () => {
    process.env.HTTP_PROXY = proxyUrl.replace('http://', '');
    await roundTrip(`http://${TARGET_NAME}:${sandboxPort}`);
    expect(seen).toHaveLength(2);
  });

  it('a proxy variable that is not an http(s) URL is a configuration error (exit 2) naming the variable, not its value', () => {
    const s = { connections: 4, connectTimeoutMs: 1_000, requestTimeoutMs: 1_000 };
    for (const [name, value] of [
      ['HTTPS_PROXY', 'ftp://user:s3cret@proxy:21'],
      ['http_proxy', 'http://user:s3cret@[bad'],
    ] as const) {
      let err: unknown;
      try {
        createDispatcher(s, { [name]: value });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(CareEtlError);
      expect((err as CareEtlError).exitCode).toBe(2);
      expect((err as CareEtlError).message).toBe(`${name} is not a proxy URL`);
      expect((err as CareEtlError).describe()).not.toContain('s3cret');
    }
  });

  it('createDispatcher: a plain Agent without proxy variables, EnvHttpProxyAgent with any of them', async () => {
    const s = { connections: 4, connectTimeoutMs: 1_000, requestTimeoutMs: 1_000 };
    const plain = createDispatcher(s, {});
    expect(plain).toBeInstanceOf(Agent);
    const proxied = createDispatcher(s, { NO_PROXY: 'example.org' });
    expect(proxied).toBeInstanceOf(EnvHttpProxyAgent);
    await Promise.all([plain.close(), proxied.close()]);
  });
});
