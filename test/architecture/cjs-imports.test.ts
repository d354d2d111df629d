/**
 * Large single-file CommonJS packages are loaded with `require` (through one module each), never with a static
 * `import`: Node 20's ESM loader lexes an imported CommonJS file's whole source in JavaScript to find its export
 * names, and V8 then optimises that lexer in the background — start-up CPU every command pays (issue 28 item 3;
 * src/core/jsonata-package.ts). `import type` costs nothing at run time; a dynamic `import()` is paid only where it runs.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';
import { describe, expect, test } from 'vitest';
import { readSources, repoRoot } from './import-layers.js';

/** Package → the one module that requires it (re2js and iconv-lite: when first needed, not at start). */
const REQUIRED_THROUGH: Record<string, string> = {
  jsonata: 'src/core/jsonata-package.ts',
  'stream-json': 'src/core/stream-json-package.ts',
  re2js: 'src/core/linear-regex.ts',
  'iconv-lite': 'src/sources/decode-stream.ts',
};
/** Of those, the ones their home requires when first needed, never at start. */
const LAZY = new Set(['re2js', 'iconv-lite']);

/** Static imports of `pkg` that load it at run time (not `import type`), as 1-based lines. */
function runtimeImports(text: string, pkg: string): number[] {
  const source = ts.createSourceFile('x.ts', text, ts.ScriptTarget.Latest, true);
  const lines: number[] = [];
  for (const node of source.statements) {
    const typeOnly = ts.isImportDeclaration(node) && node.importClause?.isTypeOnly === true;
    const spec = ts.isImportDeclaration(node) || ts.isExportDeclaration(node) ? node.moduleSpecifier : undefined;
    if (!typeOnly && spec && ts.isStringLiteral(spec) && (spec.text === pkg || spec.text.startsWith(`${pkg}/`)))
      lines.push(source.getLineAndCharacterOfPosition(node.getStart()).line + 1);
  }
  return lines;
}

describe('CommonJS packages loaded without the ESM lexer', () => {
  test('jsonata, stream-json, re2js and iconv-lite are imported statically nowhere but through their require modules', () => {
    const found: string[] = [];
    for (const file of readSources(repoRoot()).filter((f) => f.path.startsWith('src/'))) {
      for (const [pkg, home] of Object.entries(REQUIRED_THROUGH)) {
        for (const line of runtimeImports(file.text, pkg)) {
          // The lazily required ones are not imported statically by their home either: that would load them at start.
          if (LAZY.has(pkg)) found.push(`${file.path}:${line}: imports '${pkg}' at start — require it through \`requiredWhenUsed\` (src/core/lazy-require.ts)`);
          else if (file.path !== home) found.push(`${file.path}:${line}: imports '${pkg}' at run time — use ${home} (or \`import type\` for types)`);
        }
      }
    }
    expect(found).toEqual([]);
  });

  test('csv-stringify is imported statically only by the export modules (a run requires it for its first rejects summary line)', () => {
    const found: string[] = [];
    for (const file of readSources(repoRoot()).filter((f) => f.path.startsWith('src/') && !f.path.startsWith('src/export/'))) {
      for (const line of runtimeImports(file.text, 'csv-stringify')) found.push(`${file.path}:${line}: imports 'csv-stringify' at run time`);
    }
    expect(found).toEqual([]);
  });

  test('the check sees default, named and re-exporting imports, and lets type-only ones pass', () => {
    const text = "import type j from 'jsonata';\nimport jsonata from 'jsonata';\nimport { x } from 'jsonata';\nexport { y } from 'jsonata';\n";
    expect(runtimeImports(text, 'jsonata')).toEqual([2, 3, 4]);
    expect(runtimeImports("import type P from 'stream-json/Parser.js';\nimport Pick from 'stream-json/filters/Pick.js';\n", 'stream-json')).toEqual([2]);
  });
});

describe('packages a run may not need are loaded when first used (issue 28 item 3: start-up)', () => {
  // The built pipeline, as every command loads it. Loads are seen both ways: CommonJS in `require.cache`, ES modules by
  // a resolve hook that reports each URL (an `import` of any of the three would show there).
  const HOOKS = `let port;
    export async function initialize(data) { port = data.port; }
    export async function resolve(specifier, context, next) { const r = await next(specifier, context); port.postMessage(r.url); return r; }`;
  const loadedAfter = (script: string): string[] => {
    const root = pathToFileURL(join(repoRoot(), 'dist')).href;
    const out = execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { createRequire, register } from 'node:module';
         import { MessageChannel, receiveMessageOnPort } from 'node:worker_threads';
         import { setTimeout as sleep } from 'node:timers/promises';
         const { port1, port2 } = new MessageChannel();
         register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(HOOKS)}), { data: { port: port2 }, transferList: [port2] });
         const require = createRequire(${JSON.stringify(`${root}/`)});
         const root = ${JSON.stringify(root)};
         await import(root + '/pipeline/run-pipeline.js');
         ${script}
         await sleep(50);
         const seen = [...Object.keys(require.cache)];
         for (let m; (m = receiveMessageOnPort(port1)); ) seen.push(String(m.message));
         const names = seen.map((p) => ['re2js', 'iconv-lite', 'csv-stringify'].find((n) => p.includes('/node_modules/' + n + '/'))).filter(Boolean);
         console.log(JSON.stringify([...new Set(names)].sort()));`,
      ],
      { encoding: 'utf8' },
    );
    return JSON.parse(out) as string[];
  };

  test('the check sees an ES module import of one of them', () => {
    expect(loadedAfter("await import('re2js');")).toEqual(['re2js']);
  });

  test('importing the pipeline loads none of re2js, iconv-lite, csv-stringify', () => {
    expect(loadedAfter('')).toEqual([]);
  });

  test('re2js and iconv-lite are loaded by the first use that needs them: a regex, a code page', () => {
    const used = loadedAfter(
      `(await import(root + '/core/linear-regex.js')).compileLinear(/a+b/);
       const d = await import(root + '/sources/decode-stream.js'); new d.DecodeToUtf8(d.resolveEncoding('windows-1252'));`,
    );
    expect(used).toEqual(['iconv-lite', 're2js']);
  });
});
