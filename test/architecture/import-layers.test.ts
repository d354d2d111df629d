import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { findViolations, parseLayers, readSources, repoRoot } from './import-layers.js';

const root = repoRoot();
const layers = parseLayers(readFileSync(join(root, 'docs/ARCHITECTURE.md'), 'utf8'));

describe('imports go down the layers of docs/ARCHITECTURE.md', () => {
  test('every folder of src/ has a layer, and every folder of the table exists', () => {
    const folders = readdirSync(join(root, 'src')).filter((n) => statSync(join(root, 'src', n)).isDirectory());
    expect(folders.filter((f) => !layers.has(f)).map((f) => `src/${f} has no layer in docs/ARCHITECTURE.md (## Layers)`)).toEqual([]);
    expect([...layers.keys()].filter((f) => !folders.includes(f)).map((f) => `docs/ARCHITECTURE.md (## Layers) names src/${f}, which does not exist`)).toEqual(
      [],
    );
  });

  test('no import in src/ climbs a layer or crosses within one', () => {
    const files = readSources(root);
    expect(files.length).toBeGreaterThan(50);
    expect(findViolations(files, layers).map((v) => v.message)).toEqual([]);
  });
});

describe('the checker itself', () => {
  const table = parseLayers(
    '## Layers\n\n| layer | folders |\n|---|---|\n| 2 | `load` |\n| 1 | `api`, `sandbox` |\n| 0 | `core` |\n\n## Next\n| 9 | `ignored` |\n',
  );

  test('reads the table of the Layers section only', () => {
    expect([...table]).toEqual([
      ['load', 2],
      ['api', 1],
      ['sandbox', 1],
      ['core', 0],
    ]);
  });

  test('names the file, the line, the import and the rule of an upward or sideways import', () => {
    const text = [
      "import { CareEtlError } from '../core/issues.js';",
      "import type { RetryOptions } from '../load/retry.js';",
      "export { startSandbox } from '../sandbox/server.js';",
      "const lazy = () => import('../load/other.js');",
      "// import x from '../load/in-a-comment.js';",
      "import { request } from 'undici';",
      "import { sibling } from './errors.js';",
    ].join('\n');
    const v = findViolations([{ path: 'src/api/client.ts', text }], table);
    expect(v.map((x) => [x.line, x.specifier])).toEqual([
      [2, '../load/retry.js'],
      [3, '../sandbox/server.js'],
      [4, '../load/other.js'],
    ]);
    expect(v[0]!.message).toBe(
      "src/api/client.ts:2 imports '../load/retry.js' — src/api (layer 1) may import only from lower layers (core), and src/load is layer 2. Move the shared code down to a layer both can import, or the importer up (docs/ARCHITECTURE.md, ## Layers).",
    );
  });

  test('a folder or an imported folder the table does not place is a violation', () => {
    expect(findViolations([{ path: 'src/extra/x.ts', text: '' }], table)[0]!.message).toContain('src/extra has no layer');
    expect(findViolations([{ path: 'src/load/x.ts', text: "import '../extra/y.js';" }], table)[0]!.message).toContain('src/extra has no layer');
  });
});
