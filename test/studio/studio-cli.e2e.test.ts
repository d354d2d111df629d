import { spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, cleanEnv, copyTree } from '../helpers/cli.js';

const MARKER = 'studio-api-key-marker-7f3a9c';

/** A listening socket that only counts who connects: the studio must never. */
async function connectionRecorder(): Promise<{ url: string; connections: () => number; close: () => void }> {
  let count = 0;
  const sockets: Socket[] = [];
  const server = createServer((s) => {
    count++;
    sockets.push(s);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    connections: () => count,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

describe('care-etl studio (the built CLI)', () => {
  it('prints its URL, answers offline — no connection to the API, the key in no answer — and ends on SIGTERM with 0', async () => {
    const dir = copyTree('examples/clinic', 'care-etl-studio-cli-');
    const recorder = await connectionRecorder();
    const mappingFile = join(dir, 'mapping.yaml');
    // A mapping that names the API through variables, as a real one does.
    writeFileSync(
      mappingFile,
      readFileSync(mappingFile, 'utf8').replace(
        /^# target:\n# {3}baseUrl: .*\n# {3}apiKey: .*\n/m,
        'target:\n  baseUrl: ${CARE_BASE_URL}\n  apiKey: ${CARE_API_KEY}\n',
      ),
    );
    const env = { ...cleanEnv(), CARE_BASE_URL: recorder.url, CARE_API_URL: recorder.url, CARE_API_KEY: MARKER, CARE_EMR_ID: 'emr', CARE_TENANT_ID: 't' };
    const child = spawn(process.execPath, [BIN, 'studio', mappingFile, '--no-open'], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (d) => {
          stdout += d;
          const m = /^Studio: (http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{43})$/m.exec(stdout);
          if (m) resolve(m[1]!);
        });
        child.on('close', () => reject(new Error(`studio ended before printing its URL: ${stderr}`)));
      });
      const { origin, searchParams } = new URL(url);
      const headers = { authorization: `Bearer ${searchParams.get('token')}` };
      const bodies: string[] = [];
      const call = async (path: string, body?: unknown) => {
        const r = await fetch(`${origin}${path}`, { method: body ? 'POST' : 'GET', headers, body: body ? JSON.stringify(body) : undefined });
        bodies.push(await r.text());
        return JSON.parse(bodies.at(-1)!);
      };
      const m = await call('/api/mapping');
      expect(m.text).toContain('\ntarget:\n  baseUrl: ${CARE_BASE_URL}\n  apiKey: ${CARE_API_KEY}\n');
      for (const resource of ['patient', 'practitioner', 'careteam']) {
        const r = await call('/api/evaluate', { text: m.text, resource });
        expect(r.errors).toEqual([]);
        expect(r.totals.loaded).toBeGreaterThan(0);
      }
      await call('/api/evaluate', { text: m.text.replace('${CARE_API_KEY}', '${CARE_API_KEY_TYPO}') });
      expect(await call('/api/test-case', { text: m.text, resource: 'patient', index: 0 })).toMatchObject({ name: 'patient line 2' });
      for (const b of [...bodies, stdout, stderr]) expect(b).not.toContain(MARKER);
      expect(recorder.connections()).toBe(0);
    } finally {
      child.kill('SIGTERM');
      const code = await exited;
      recorder.close();
      rmSync(dir, { recursive: true, force: true });
      expect(code).toBe(0);
      expect(stderr).toMatch(/SIGTERM: stopping the studio/);
    }
  });
});
