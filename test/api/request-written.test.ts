/**
 * Work that can wait for an answer (issue 28, a run's start): `afterNextRequestWritten` runs it once the next request
 * is on the wire, while its answer is awaited — against a real HTTP server on 127.0.0.1 that holds the answer back.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { CareClient } from '../../src/api/client.js';
import { resolveConnection } from '../../src/api/connection.js';
import { afterNextRequestWritten } from '../../src/api/request-written.js';

let server: Server | undefined;
let client: CareClient | undefined;

afterEach(async () => {
  await client?.close();
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
  client = server = undefined;
});

/** A server answering every listing with an empty page once `release()` was called (at once when `hold` is false). */
async function start(hold: boolean) {
  const events: string[] = [];
  let release!: () => void;
  const released = hold ? new Promise<void>((r) => (release = r)) : Promise.resolve();
  server = createServer((req, res) => {
    events.push(`server: ${req.method} ${req.url?.split('?')[0]}`);
    void released.then(() => {
      events.push('answered');
      res.setHeader('content-type', 'application/fhir+json');
      res.end(JSON.stringify({ resourceType: 'Bundle', type: 'searchset', entry: [] }));
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  client = new CareClient(resolveConnection({ baseUrl: `http://127.0.0.1:${port}`, apiKey: 'k', emrId: 'e', tenantId: 't' }), { retry: false });
  return { events, release: () => release?.() };
}

async function firstPage(c: CareClient): Promise<void> {
  const pages = c.pages('Patient', { pageSize: 1, retry: {} });
  await pages.next();
  await pages.return(undefined);
}

describe('afterNextRequestWritten', () => {
  it('runs the work once, after the request was written and before its answer came', async () => {
    const s = await start(true);
    const cancel = afterNextRequestWritten(() => {
      s.events.push('work');
      s.release(); // the server answers only once the work ran: without it the page never comes
    });
    await firstPage(client!);
    cancel();
    await firstPage(client!); // a later request does not run it again
    expect(s.events.filter((e) => e === 'work')).toEqual(['work']);
    expect(s.events.indexOf('work')).toBeLessThan(s.events.indexOf('answered'));
    expect(s.events.filter((e) => e.startsWith('server'))).toEqual(['server: GET /Patient', 'server: GET /Patient']);
  });

  it('cancelled before anything was written: the work never runs', async () => {
    const s = await start(false);
    const cancel = afterNextRequestWritten(() => s.events.push('work'));
    cancel();
    await firstPage(client!);
    await new Promise((r) => setImmediate(r));
    expect(s.events).toEqual(['server: GET /Patient', 'answered']);
  });
});
