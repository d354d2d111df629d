/**
 * The layering rule of docs/ARCHITECTURE.md ("## Layers"), read from the document itself so the drawing and the
 * check cannot drift apart: a folder of src/ may import its own files and the folders of lower layers, nothing
 * else. Imports are found by TypeScript's own pre-processor (static, `export … from`, `import type` and dynamic
 * `import()`), so a comment or a string that merely looks like an import is not one.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, posix, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/** Folder of src/ → its layer. */
export type Layers = ReadonlyMap<string, number>;

/** Reads the `| layer | folders | … |` table under `## Layers`: folders are the backticked names of the second cell. */
export function parseLayers(markdown: string): Layers {
  const section = /^## Layers\s*$([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(markdown)?.[1];
  if (!section) throw new Error('docs/ARCHITECTURE.md has no `## Layers` section');
  const layers = new Map<string, number>();
  for (const line of section.split('\n')) {
    const row = /^\|\s*(\d+)\s*\|([^|]*)\|/.exec(line);
    if (!row) continue;
    for (const [, folder] of row[2]!.matchAll(/`([^`]+)`/g)) {
      if (layers.has(folder!)) throw new Error(`docs/ARCHITECTURE.md, ## Layers: \`${folder}\` is listed twice`);
      layers.set(folder!, Number(row[1]));
    }
  }
  if (layers.size === 0) throw new Error('docs/ARCHITECTURE.md, ## Layers: no `| layer | folders |` rows found');
  return layers;
}

export interface SourceFile {
  /** Path relative to the repository root, `/`-separated: `src/api/client.ts`. */
  path: string;
  text: string;
}

export interface Violation {
  file: string;
  line: number;
  specifier: string;
  message: string;
}

/** `src/<folder>/…` → folder; undefined outside src/ (node modules, package.json, …). */
function folderOf(path: string): string | undefined {
  const parts = path.split('/');
  return parts[0] === 'src' && parts.length > 2 ? parts[1] : undefined;
}

/** Every import of `files` that does not go down the layers (or names a folder the table does not place). */
export function findViolations(files: readonly SourceFile[], layers: Layers): Violation[] {
  const below = (n: number) => [...layers].filter(([, l]) => l < n).map(([f]) => f);
  const out: Violation[] = [];
  for (const file of files) {
    const from = folderOf(file.path);
    if (from === undefined) {
      out.push({
        file: file.path,
        line: 1,
        specifier: '',
        message: `${file.path}: every source file lives in a folder of src/ that docs/ARCHITECTURE.md (## Layers) places in a layer`,
      });
      continue;
    }
    const fromLayer = layers.get(from);
    if (fromLayer === undefined) {
      out.push({
        file: file.path,
        line: 1,
        specifier: '',
        message: `${file.path}: the folder src/${from} has no layer — add it to the table under "## Layers" in docs/ARCHITECTURE.md`,
      });
      continue;
    }
    for (const ref of ts.preProcessFile(file.text, true, true).importedFiles) {
      if (!ref.fileName.startsWith('.')) continue; // packages and node: builtins
      const target = posix.normalize(posix.join(posix.dirname(file.path), ref.fileName));
      const to = folderOf(target);
      if (to === undefined || to === from) continue;
      const toLayer = layers.get(to);
      if (toLayer !== undefined && toLayer < fromLayer) continue;
      const line = ts.getLineAndCharacterOfPosition(ts.createSourceFile(file.path, file.text, ts.ScriptTarget.Latest), ref.pos).line + 1;
      const rule =
        toLayer === undefined
          ? `src/${to} has no layer in docs/ARCHITECTURE.md (## Layers)`
          : `src/${from} (layer ${fromLayer}) may import only from lower layers (${below(fromLayer).join(', ') || 'none'}), and src/${to} is layer ${toLayer}`;
      out.push({
        file: file.path,
        line,
        specifier: ref.fileName,
        message: `${file.path}:${line} imports '${ref.fileName}' — ${rule}. Move the shared code down to a layer both can import, or the importer up (docs/ARCHITECTURE.md, ## Layers).`,
      });
    }
  }
  return out;
}

/** Every `.ts` file under `root`/src, as `SourceFile`s with repository-relative paths. */
export function readSources(root: string): SourceFile[] {
  const files: SourceFile[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith('.ts')) files.push({ path: relative(root, path).split(sep).join('/'), text: readFileSync(path, 'utf8') });
    }
  };
  walk(join(root, 'src'));
  return files;
}

export const repoRoot = (): string => join(dirname(fileURLToPath(import.meta.url)), '..', '..');
