/**
 * Large single-file CommonJS packages are loaded with `require` (through one module each), never with a static
 * `import`: Node 20's ESM loader lexes an imported CommonJS file's whole source in JavaScript to find its export
 * names, and V8 then optimises that lexer in the background — start-up CPU every command pays (issue 28 item 3;
 * src/core/jsonata-package.ts). `import type` costs nothing at run time; a dynamic `import()` is paid only where it runs.
 */
import ts from 'typescript';
import { describe, expect, test } from 'vitest';
import { readSources, repoRoot } from './import-layers.js';

/** Package → the one module that requires it. */
const REQUIRED_THROUGH: Record<string, string> = {
  jsonata: 'src/core/jsonata-package.ts',
  'stream-json': 'src/core/stream-json-package.ts',
};

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
  test('jsonata and stream-json are imported statically nowhere but through their require modules', () => {
    const found: string[] = [];
    for (const file of readSources(repoRoot()).filter((f) => f.path.startsWith('src/'))) {
      for (const [pkg, home] of Object.entries(REQUIRED_THROUGH)) {
        for (const line of runtimeImports(file.text, pkg)) {
          if (file.path !== home) found.push(`${file.path}:${line}: imports '${pkg}' at run time — use ${home} (or \`import type\` for types)`);
        }
      }
    }
    expect(found).toEqual([]);
  });

  test('the check sees default, named and re-exporting imports, and lets type-only ones pass', () => {
    const text = "import type j from 'jsonata';\nimport jsonata from 'jsonata';\nimport { x } from 'jsonata';\nexport { y } from 'jsonata';\n";
    expect(runtimeImports(text, 'jsonata')).toEqual([2, 3, 4]);
    expect(runtimeImports("import type P from 'stream-json/Parser.js';\nimport Pick from 'stream-json/filters/Pick.js';\n", 'stream-json')).toEqual([2]);
  });
});
