/**
 * Issue 28 item 1: a listing asks for its next page before it indexes the one it has (pages follow `next` links one
 * at a time, so indexing while nothing was in flight left the server idle). Real HTTP: the real client against a
 * small loopback server serving three pages; the order of "page sent" (undici's own diagnostics channel: the request
 * written to the socket) and "resource indexed" (the match rule the index calls for every listed resource) is logged.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CareClient } from '../../src/api/client.js';
import { resolveConnection } from '../../src/api/connection.js';
import { ServerIndexes, type MatchRule } from '../../src/load/server-index.js';

const PAGES = 3;
const PER_PAGE = 4;
const log: string[] = [];
/** Page numbers whose entries are refused (an entry without an id). */
const broken = new Set<number>();
let server: Server;
let baseUrl: string;

const onSent = (m: unknown) => {
  const { path } = (m as { request: { path: string } }).request;
  log.push(`sent page ${new URL(path, 'http://x').searchParams.get('page') ?? '1'}`);
};

beforeAll(async () => {
  subscribe('undici:client:sendHeaders', onSent);
  server = createServer((req, res) => {
    const page = Number(new URL(req.url!, 'http://x').searchParams.get('page') ?? '1');
    log.push(`answered page ${page}`);
    const entry = Array.from({ length: PER_PAGE }, (_, i) => ({
      resource: { resourceType: 'Patient', id: broken.has(page) && i === 1 ? undefined : `p${page}-${i}` },
    }));
    const link = page < PAGES ? [{ relation: 'next', url: `${baseUrl}/Patient?page=${page + 1}` }] : [];
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ resourceType: 'Bundle', entry, link }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  unsubscribe('undici:client:sendHeaders', onSent);
  await new Promise<void>((r) => server.close(() => r()));
});

/** A match rule that logs each listed resource the index reads. */
const logging: MatchRule = {
  ofMapped: async () => '',
  ofServer: async (r) => {
    log.push(`indexed ${r.id}`);
    return [];
  },
};

function indexes(): { indexes: ServerIndexes; client: CareClient } {
  const client = new CareClient(resolveConnection({ baseUrl, apiKey: 'k', emrId: 'e', tenantId: 't' }), { retry: false });
  return { client, indexes: new ServerIndexes(client, new Map([['Patient', new Map([['patient', logging]])]])) };
}

describe('listing pages', () => {
  it('asks for the next page before indexing the one it has, and lists every resource once', async () => {
    const { client, indexes: ix } = indexes();
    try {
      // A run's sockets are open by the time it lists (undici reuses a socket only a loop turn after its answer):
      // one listing first, as a run's preflight and writes would.
      await ix.refresh('Patient', 'opens the sockets');
      log.length = 0;
      const index = await ix.refresh('Patient', 'test');
      expect(index.size).toBe(PAGES * PER_PAGE);
      expect(ix.builds[1]).toMatchObject({ pages: PAGES, resources: PAGES * PER_PAGE });
      // what a re-read from its last page reads again; and the server's page size as served
      expect(index.lastPageUrl).toBe(`${baseUrl}/Patient?page=${PAGES}`);
      expect(index.lastPageResources).toBe(PER_PAGE);
      expect(client.servedPageSize).toBe(PER_PAGE);
    } finally {
      await client.close();
    }
    for (let page = 1; page < PAGES; page++) {
      // Before: page n + 1 was asked for once every resource of page n was indexed.
      expect(log.indexOf(`sent page ${page + 1}`), log.join(', ')).toBeLessThan(log.indexOf(`indexed p${page}-0`));
    }
    expect(log.filter((l) => l.startsWith('indexed'))).toHaveLength(PAGES * PER_PAGE);
  });

  it('a refused page still fails the listing naming that page; the page asked for ahead is answered, not left running', async () => {
    log.length = 0;
    broken.add(2);
    const { client, indexes: ix } = indexes();
    try {
      await expect(ix.get('Patient', 'test')).rejects.toThrow(/page 2: entry 2/);
      expect(log).toContain('answered page 3');
      expect(log.filter((l) => l.startsWith('indexed p2') || l.startsWith('indexed p3'))).toEqual([]);
    } finally {
      broken.clear();
      await client.close();
    }
  });
});
