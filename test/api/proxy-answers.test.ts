/**
 * Proxy answers (issue 25, item 4): a proxy's 407, a CONNECT answered 502 and an unreachable proxy are named as the
 * proxy's failures (host:port and variable), never the server's; `user:password` of a proxy URL is a secret in every
 * form an echo takes. A tiny proxy on 127.0.0.1 answers CONNECT and absolute-URI requests itself, echoing the request
 * headers in its body, as some proxies' error pages do; the target name is never resolved (the proxy is asked).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CareClient } from '../../src/api/client.js';
import { resolveConnection } from '../../src/api/connection.js';
import { ProxyError } from '../../src/api/errors.js';
import { redactKnown } from '../../src/core/secret.js';
import { deadPort } from '../helpers/hostile-server.js';

const USER = 'etl-user';
const PASSWORD = 'pr0xy:p@ss/word';
const USERINFO = `${encodeURIComponent(USER)}:${encodeURIComponent(PASSWORD)}`;
const BASIC = Buffer.from(`${USER}:${PASSWORD}`).toString('base64');
const VARS = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'NO_PROXY', 'no_proxy'];

let proxy: http.Server;
let port: number;
let status = 407;
const authSeen: string[] = [];

beforeAll(async () => {
  proxy = http.createServer((req, res) => {
    authSeen.push(String(req.headers['proxy-authorization']));
    res.writeHead(status, { 'content-type': 'text/plain' }).end(`proxy says no; you sent ${JSON.stringify(req.headers)}`);
  });
  proxy.on('connect', (req, socket) => {
    authSeen.push(String(req.headers['proxy-authorization']));
    const body = `<html>${status}: request headers ${JSON.stringify(req.headers)}</html>`;
    socket.end(`HTTP/1.1 ${status} Proxy Says No\r\ncontent-type: text/html\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  port = (proxy.address() as AddressInfo).port;
});
afterAll(async () => {
  proxy.closeAllConnections();
  await new Promise((r) => proxy.close(r));
});
const saved = Object.fromEntries(VARS.map((k) => [k, process.env[k]]));
afterEach(() => {
  for (const k of VARS) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
  authSeen.length = 0;
});

async function failure(baseUrl: string): Promise<ProxyError> {
  const c = new CareClient(resolveConnection({ baseUrl, apiKey: 'api-key-1234', emrId: 'e', tenantId: 't', allowInsecure: true, requestTimeoutMs: 5_000 }), {
    retry: false,
  });
  try {
    const err = await c
      .list('Patient')
      .next()
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(ProxyError);
    return err as ProxyError;
  } finally {
    await c.close();
  }
}

describe('proxy answers name the proxy', () => {
  it('https through HTTPS_PROXY, CONNECT answered 407: the proxy refused the credentials, exit 2, never retried', async () => {
    status = 407;
    process.env.HTTPS_PROXY = `http://${USERINFO}@127.0.0.1:${port}`;
    const err = await failure('https://care-api.test/api');
    expect(err.message).toMatch(new RegExp(`^the proxy 127\\.0\\.0\\.1:${port} \\(HTTPS_PROXY\\) refused the credentials \\(407`));
    expect(err.message).toContain('was not sent to the server');
    expect(err.exitCode).toBe(2);
    expect(err.toIssues()[0]!.code).toBe('proxy-auth');
    expect(authSeen).toEqual([`Basic ${BASIC}`]);
  });

  it('CONNECT answered 502: the proxy could not reach the server, exit 3', async () => {
    status = 502;
    process.env.https_proxy = `127.0.0.1:${port}`;
    const err = await failure('https://care-api.test');
    expect(err.message).toMatch(new RegExp(`^the proxy 127\\.0\\.0\\.1:${port} \\(https_proxy\\) answered 502 to the tunnel request \\(CONNECT\\)`));
    expect(err.exitCode).toBe(3);
    expect(err.toIssues()[0]!.code).toBe('proxy-failed');
    expect(err.hint).toContain('https_proxy');
  });

  it('plain http through HTTP_PROXY answered 407: the proxy refused the credentials', async () => {
    status = 407;
    process.env.HTTP_PROXY = `http://${USERINFO}@127.0.0.1:${port}`;
    const err = await failure('http://care-api.test');
    expect(err.message).toContain(`the proxy 127.0.0.1:${port} (HTTP_PROXY) refused the credentials (407`);
    expect(err.status).toBe(407);
  });

  it('a proxy that refuses connections is named, not the server', async () => {
    const dead = await deadPort();
    process.env.HTTPS_PROXY = `http://127.0.0.1:${dead}`;
    const err = await failure('https://care-api.test');
    expect(err.message).toContain(`the proxy 127.0.0.1:${dead} (HTTPS_PROXY) cannot be reached (ECONNREFUSED)`);
    expect(err.exitCode).toBe(3);
  });
});

describe('proxy credentials are secrets', () => {
  it('every form of user:password is redacted once the client is made: as written, decoded, base64 (Proxy-Authorization), the password alone', async () => {
    status = 407;
    process.env.HTTPS_PROXY = `http://${USERINFO}@127.0.0.1:${port}`;
    await failure('https://care-api.test');
    for (const form of [USERINFO, `${USER}:${PASSWORD}`, BASIC, PASSWORD, encodeURIComponent(PASSWORD), `Proxy-Authorization: Basic ${BASIC}`]) {
      expect(redactKnown(`echo: ${form} end`), form).not.toContain(PASSWORD.slice(0, 5));
      expect(redactKnown(`echo: ${form} end`), form).not.toContain(BASIC.slice(4, 20));
    }
  });
});
