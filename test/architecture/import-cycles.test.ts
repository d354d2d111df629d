/**
 * No import cycle in src/: a cycle (even a type-only one) means two modules cannot be understood, tested or moved
 * apart. Imports are read as import-layers.ts reads them (TypeScript's pre-processor: static, `import type`,
 * `export … from`, dynamic `import()`); each cycle is named file by file.
 */
import { posix } from 'node:path';
import ts from 'typescript';
import { describe, expect, test } from 'vitest';
import { readSources, repoRoot, type SourceFile } from './import-layers.js';

/** File → the files of `files` it imports (relative specifiers; `./x.js` is `./x.ts`). */
function importGraph(files: readonly SourceFile[]): Map<string, string[]> {
  const known = new Set(files.map((f) => f.path));
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const targets = new Set<string>();
    for (const ref of ts.preProcessFile(file.text, true, true).importedFiles) {
      if (!ref.fileName.startsWith('.')) continue;
      const target = posix.normalize(posix.join(posix.dirname(file.path), ref.fileName)).replace(/\.js$/, '.ts');
      if (known.has(target)) targets.add(target);
    }
    graph.set(file.path, [...targets].sort());
  }
  return graph;
}

/** The strongly connected components of more than one file (or a file importing itself), as sorted lists (Tarjan). */
function findCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v)?.includes(v)) cycles.push(component.sort());
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return cycles;
}

const describeCycle = (files: string[]): string => `import cycle: ${files.join(' ↔ ')} — move the shared part (often types) into a module both import`;

describe('no import cycle in src/', () => {
  test('the import graph of src/ has no cycle', () => {
    const files = readSources(repoRoot());
    expect(files.length).toBeGreaterThan(50);
    expect(findCycles(importGraph(files)).map(describeCycle)).toEqual([]);
  });
});

describe('the cycle finder itself', () => {
  test('finds a type-only cycle across folders and a self-import, and names their files', () => {
    const files: SourceFile[] = [
      { path: 'src/pipeline/run.ts', text: "import type { Report } from './report.js';\nimport { x } from '../core/x.js';" },
      { path: 'src/pipeline/report.ts', text: "import type { Plan } from './plan/plan.js';" },
      { path: 'src/pipeline/plan/plan.ts', text: "export type { Run } from '../run.js';" },
      { path: 'src/core/x.ts', text: "// import { y } from '../pipeline/run.js';\nimport { readFileSync } from 'node:fs';" },
      { path: 'src/core/self.ts', text: "const again = () => import('./self.js');" },
    ];
    expect(findCycles(importGraph(files)).map(describeCycle)).toEqual([
      'import cycle: src/core/self.ts — move the shared part (often types) into a module both import',
      'import cycle: src/pipeline/plan/plan.ts ↔ src/pipeline/report.ts ↔ src/pipeline/run.ts — move the shared part (often types) into a module both import',
    ]);
  });

  test('a chain without a way back is no cycle', () => {
    const files: SourceFile[] = [
      { path: 'src/a/a.ts', text: "import '../b/b.js';" },
      { path: 'src/b/b.ts', text: "import '../c/c.js';" },
      { path: 'src/c/c.ts', text: '' },
    ];
    expect(findCycles(importGraph(files))).toEqual([]);
  });
});
