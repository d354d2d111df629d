import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { getBundleValidator } from '../../src/schemas/resource-schemas.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { client, samplePractitioner } from './helpers.js';

let sb: Sandbox;
let c: ReturnType<typeof client>;
const created: string[] = [];
beforeAll(async () => {
  sb = await startSandbox({ pageSize: 7 });
  c = client(sb);
  for (let i = 0; i < 23; i++) created.push((await c.create('Practitioner', samplePractitioner())).id);
});
afterAll(async () => {
  await c.close();
  await sb.close();
});

type Bundle = { link: { relation: string; url: string }[]; entry: { resource: { id: string } }[] };
const next = (b: Bundle) => b.link.find((l) => l.relation === 'next')?.url;

async function collect(first: string, onPage?: (n: number) => Promise<void>): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let url: string | undefined = first;
  let pages = 0;
  while (url) {
    const r = await c.call('GET', url);
    expect(r.status, r.text).toBe(200);
    expect(getBundleValidator()(r.body)).toEqual([]);
    ids.push(...(r.body as Bundle).entry.map((e) => e.resource.id));
    url = next(r.body);
    if (url) expect(url.startsWith(sb.url)).toBe(true);
    pages++;
    await onPage?.(pages);
  }
  return { ids, pages };
}

describe('paging', () => {
  test('default page size, following only the next links, in creation order', async () => {
    const { ids, pages } = await collect('/Practitioner');
    expect(pages).toBe(4); // 7 + 7 + 7 + 2
    expect(ids).toEqual(created);
  });

  test('_count overrides the page size (and is carried into next links)', async () => {
    const first = await c.call('GET', '/Practitioner?_count=5');
    expect(first.body.entry).toHaveLength(5);
    expect(next(first.body)).toMatch(/_count=5/);
    const { ids, pages } = await collect('/Practitioner?_count=5');
    expect(pages).toBe(5);
    expect(ids).toEqual(created);
  });

  test('no next link on the last page; exact multiple ends without an empty page', async () => {
    const r = await c.call('GET', '/Practitioner?_count=23');
    expect(r.body.entry).toHaveLength(23);
    expect(next(r.body)).toBeUndefined();
    expect(r.body.link[0]).toEqual({ relation: 'self', url: `${sb.url}/Practitioner?_count=23` });
    const big = await c.call('GET', '/Practitioner?_count=5000'); // capped at 1000
    expect(big.body.entry).toHaveLength(23);
  });

  test('inserts during paging neither skip nor duplicate resources', async () => {
    const added: string[] = [];
    const { ids, pages } = await collect('/Practitioner?_count=6', async () => {
      added.push((await c.create('Practitioner', samplePractitioner())).id);
    });
    expect(pages).toBeGreaterThanOrEqual(4);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.slice(0, created.length)).toEqual(created);
    // everything inserted before the last page was fetched shows up, after the originals
    expect(ids.slice(created.length)).toEqual(added.slice(0, ids.length - created.length));
  });

  test('updates do not move a resource in the order', async () => {
    const all = (await collect('/Practitioner?_count=1000')).ids;
    await c.call('PATCH', `/Practitioner/${all[0]}`, { body: { active: false } });
    expect((await collect('/Practitioner?_count=4')).ids).toEqual(all);
  });

  test('link URLs follow the Host header (works behind any port)', async () => {
    const r = await c.call('GET', '/Practitioner?_count=2', { headers: { Host: `localhost:${sb.port}` } });
    expect(next(r.body)).toMatch(new RegExp(`^http://localhost:${sb.port}/Practitioner\\?_count=2&_cursor=`));
    expect(r.body.entry[0].fullUrl).toBe(`http://localhost:${sb.port}/Practitioner/${created[0]}`);
  });
});

describe('countParam: what `_count` does', () => {
  test.each([
    ['ignore', 200, 7, false],
    ['reject', 400, undefined, false],
    ['honour', 200, 5, true],
  ] as const)('%s: GET /Practitioner?_count=5 → %s, %s entries, next link carries _count: %s', async (countParam, status, entries, carried) => {
    const s = await startSandbox({ pageSize: 7, countParam });
    const sc = client(s);
    try {
      for (let i = 0; i < 12; i++) await sc.create('Practitioner', samplePractitioner());
      const r = await sc.call('GET', '/Practitioner?_count=5');
      expect(r.status, r.text).toBe(status);
      if (entries === undefined) return;
      expect(r.body.entry).toHaveLength(entries);
      expect(next(r.body)?.includes('_count=')).toBe(carried);
      // the next link is followed as given: the rest of the 12
      const rest = await sc.call('GET', next(r.body)!);
      expect(rest.body.entry).toHaveLength(Math.min(entries, 12 - entries));
    } finally {
      await sc.close();
      await s.close();
    }
  });

  test('an unknown mode is refused before the server starts', async () => {
    await expect(startSandbox({ countParam: 'sometimes' as never })).rejects.toThrow(
      'Expected `countParam` to be one of honour, ignore, reject, got `sometimes`',
    );
  });
});
