import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStudio, type StartStudioOptions, type StudioServer } from '../../src/studio/server.js';

/** A stand-in for the page part H builds (dist/studio): these tests never depend on it. */
export function placeholderPage(): string {
  const dir = mkdtempSync(join(tmpdir(), 'care-etl-studio-page-'));
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'index.html'), '<!doctype html><title>studio placeholder</title><script src="/assets/studio.js"></script>');
  writeFileSync(join(dir, 'assets', 'studio.js'), 'console.log("placeholder");');
  return dir;
}

export async function studioOn(mappingFile: string, opts: Partial<StartStudioOptions> = {}): Promise<StudioServer> {
  return startStudio({ mappingFile, staticDir: placeholderPage(), ...opts });
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  json: () => any;
}

/** One HTTP exchange with any headers, Host included (fetch does not let a caller set Host). */
export function exchange(s: StudioServer, method: string, path: string, opts: { headers?: Record<string, string>; body?: unknown } = {}): Promise<Answer> {
  const data = opts.body === undefined ? undefined : typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port: s.port, method, path, headers: { ...(data ? { 'content-type': 'application/json' } : {}), ...opts.headers } },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, json: () => JSON.parse(body) }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

/** An authorised API call. */
export async function api(s: StudioServer, method: string, path: string, body?: unknown): Promise<Answer> {
  return exchange(s, method, path, { headers: { authorization: `Bearer ${s.token}` }, body });
}

/** 1-based line and column of the first `needle` in `text`. */
export function positionOf(text: string, needle: string): { line: number; column: number } {
  const at = text.indexOf(needle);
  if (at < 0) throw new Error(`${needle} not in the text`);
  const before = text.slice(0, at);
  return { line: before.split('\n').length, column: at - before.lastIndexOf('\n') };
}
