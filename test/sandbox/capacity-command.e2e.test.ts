import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { beforeAll, describe, expect, test } from 'vitest';

// Spawns the built CLI (npm run build).
const root = fileURLToPath(new URL('../..', import.meta.url));
const run = (args: string[]) => spawn(process.execPath, ['bin/run.js', 'sandbox', ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });

describe('care-etl sandbox --max-in-flight', () => {
  beforeAll(() => {
    if (!existsSync(`${root}/dist/commands/sandbox.js`)) throw new Error('dist/ is missing: run `npm run build` first');
  });

  test('serves with a capacity, and says so among its faults', async () => {
    const child = run(['--port', '0', '--max-in-flight', '2', '--latency', '5']);
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
    const url = /^export CARE_BASE_URL=(.+)$/.exec(line)![1]!;
    const headers = { 'Service-SubscriptionKey': 'sandbox-key', 'Service-EmrId': 'sandbox-emr', 'Service-TenantId': 'demo-clinic' };
    const answers = await Promise.all(
      Array.from({ length: 4 }, () => request(`${url}/Patient`, { headers }).then(async (r) => (await r.body.text(), r.statusCode))),
    );
    expect(answers).toEqual([200, 200, 200, 200]);
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
    expect(err).toContain('"maxInFlight":2');
  });

  test.each(['0', '-3', '2.5', 'many'])('refuses `--max-in-flight %s` with a p-queue style message (exit 2)', async (value) => {
    const child = run(['--max-in-flight', value]);
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const [code] = await once(child, 'exit');
    expect(code).toBe(2);
    expect(err).toContain(`Expected \`--max-in-flight\` to be an integer ≥ 1, got \`${value}\``);
  });
});
