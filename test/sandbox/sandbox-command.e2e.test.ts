import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { beforeAll, describe, expect, test } from 'vitest';

// Spawns the built CLI (npm run build; CI builds in `npm ci` → prepare).
const root = fileURLToPath(new URL('../..', import.meta.url));
const run = (args: string[]) => spawn(process.execPath, ['bin/run.js', 'sandbox', ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });

async function firstLine(child: ReturnType<typeof run>): Promise<string> {
  const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  return line;
}

describe('care-etl sandbox', () => {
  beforeAll(() => {
    if (!existsSync(`${root}/dist/commands/sandbox.js`)) throw new Error('dist/ is missing: run `npm run build` first');
  });

  test('--json prints one line with the URL and demo credentials, serves, and stops on SIGTERM', async () => {
    const child = run(['--port', '0', '--json', '--seed', '7']);
    const info = JSON.parse(await firstLine(child)) as Record<string, string>;
    expect(info).toMatchObject({ apiKey: 'sandbox-key', emrId: 'sandbox-emr', tenantId: 'demo-clinic' });
    expect(info.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await request(`${info.url}/Patient`, {
      headers: { 'Service-SubscriptionKey': info.apiKey!, 'Service-EmrId': info.emrId!, 'Service-TenantId': info.tenantId! },
    });
    expect(res.statusCode).toBe(200);
    expect(await res.body.json()).toMatchObject({ resourceType: 'Bundle', type: 'searchset' });
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
  });

  test('prints shell export lines', async () => {
    const child = run(['--port', '0']);
    const lines: string[] = [];
    const rl = createInterface({ input: child.stdout! });
    for await (const l of rl) {
      lines.push(l);
      if (lines.length === 4) break;
    }
    child.kill('SIGINT');
    await once(child, 'exit');
    expect(lines[0]).toMatch(/^export CARE_BASE_URL=http:\/\/127\.0\.0\.1:\d+$/);
    expect(lines.slice(1)).toEqual(['export CARE_API_KEY=sandbox-key', 'export CARE_EMR_ID=sandbox-emr', 'export CARE_TENANT_ID=demo-clinic']);
  });

  test('--gateway-error-rate 1: a create is stored, then answered 502/503/504 with an HTML page', async () => {
    const child = run(['--port', '0', '--json', '--gateway-error-rate', '1']);
    const info = JSON.parse(await firstLine(child)) as Record<string, string>;
    const headers = { 'Service-SubscriptionKey': info.apiKey!, 'Service-EmrId': info.emrId!, 'Service-TenantId': info.tenantId! };
    const res = await request(`${info.url}/Practitioner`, {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/json' },
      body: JSON.stringify({ resourceType: 'Practitioner', name: [{ family: 'Gateway' }] }),
    });
    expect([502, 503, 504]).toContain(res.statusCode);
    expect(res.headers['content-type']).toBe('text/html');
    expect(await res.body.text()).toContain(`<title>${res.statusCode} `);
    const list = await request(`${info.url}/Practitioner`, { headers });
    expect(((await list.body.json()) as { entry: unknown[] }).entry).toHaveLength(1);
    child.kill('SIGTERM');
    await once(child, 'exit');
  });

  test('rejects an out-of-range rate with a p-queue style message (exit 2)', async () => {
    const child = run(['--drop-rate', 'x']);
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const [code] = await once(child, 'exit');
    expect(code).toBe(2);
    expect(err).toContain('Expected `--drop-rate` to be a number between 0 and 1, got `x`');
  });
});
