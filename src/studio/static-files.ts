/**
 * The page's files, built by `npm run build` into dist/studio (scripts/build-studio.mjs): `/` is its index.html,
 * `/assets/<file>` its scripts and styles. Nothing else is served — no listing, no path with a folder in it.
 */
import { readFile } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** dist/studio of this package (from src/studio or dist/studio alike: two folders up is the package). */
export const DEFAULT_STATIC_DIR = fileURLToPath(new URL('../../dist/studio/', import.meta.url));

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
};

const ASSET = /^\/assets\/([A-Za-z0-9][A-Za-z0-9._-]*)$/;

export type StaticAnswer = { status: 200; type: string; body: Buffer } | { status: 404 | 500; message: string };

/** The file for a GET of `pathname`, or why not. */
export async function staticFile(dir: string, pathname: string): Promise<StaticAnswer> {
  if (pathname === '/' || pathname === '/index.html') {
    const body = await readFile(join(dir, 'index.html')).catch(() => undefined);
    return body ? { status: 200, type: TYPES['.html']!, body } : { status: 500, message: 'the studio page is not built: run npm run build' };
  }
  const name = ASSET.exec(pathname)?.[1];
  const type = name ? TYPES[extname(name)] : undefined;
  if (!name || !type || name.includes('..')) return { status: 404, message: 'not found' };
  const body = await readFile(join(dir, 'assets', name)).catch(() => undefined);
  return body ? { status: 200, type, body } : { status: 404, message: 'not found' };
}
