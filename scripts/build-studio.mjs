#!/usr/bin/env node
/**
 * Builds the mapping studio's page (studio-page/) into dist/studio/: index.html and assets/studio.{js,css}, bundled
 * and minified by esbuild — CodeMirror included, so the page needs no CDN and works offline; no source maps shipped;
 * no inline script (the studio serves it under `Content-Security-Policy: default-src 'self'`).
 * Runs after `tsc` in `npm run build`: the list of JSONata and care-etl functions the editor completes is read from
 * the compiled src/mapping/functions.ts, so the page and the mapping engine cannot disagree on it.
 * Usage: node scripts/build-studio.mjs
 */
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist/studio');

let functions;
try {
  const lib = await import(pathToFileURL(join(root, 'dist/mapping/functions.js')).href);
  functions = [...new Set([...lib.JSONATA_BUILTINS, ...lib.LIBRARY_FUNCTIONS])].sort();
} catch (err) {
  console.error(`build-studio: cannot read dist/mapping/functions.js (${err.message}): run tsc -p tsconfig.build.json first`);
  process.exit(1);
}

// dist/studio/ also holds the compiled src/studio/ (the server): only the page's own files are replaced.
rmSync(join(out, 'assets'), { recursive: true, force: true });
rmSync(join(out, 'index.html'), { force: true });
mkdirSync(join(out, 'assets'), { recursive: true });
await build({
  absWorkingDir: root,
  entryPoints: { studio: 'studio-page/src/main.ts' },
  bundle: true,
  minify: true,
  format: 'esm',
  target: 'es2022',
  platform: 'browser',
  sourcemap: false,
  legalComments: 'none',
  define: { __STUDIO_FUNCTIONS__: JSON.stringify(functions) },
  outdir: join(out, 'assets'),
  logLevel: 'warning',
});
await build({
  absWorkingDir: root,
  entryPoints: { studio: 'studio-page/studio.css' },
  bundle: true,
  minify: true,
  outdir: join(out, 'assets'),
  logLevel: 'warning',
});
copyFileSync(join(root, 'studio-page/index.html'), join(out, 'index.html'));
