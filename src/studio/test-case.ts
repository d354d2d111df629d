/**
 * "Add as test case": a sampled row and what the mapping now makes of it become a case of the mapping's test file,
 * in the format `care-etl test` reads (src/mapping-tests/load-test-file.ts) — its input, the `$ref`s stubbed
 * `auto` as the studio stubs them, and the expectation: the resource (`expect`), the reject (`reject`) or nothing
 * (`count: 0`). The case is spliced as text after the last one, so every byte of the file around it — comments,
 * alignment, flow style — stays as written; only a file without a block list of cases is rewritten through the
 * YAML document (comments kept).
 */
import { readdir, readFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { Document, isMap, isSeq, parseDocument, type YAMLSeq } from 'yaml';
import type { RowInContext } from './row-results.js';
import { writeFileAtomic } from './save-file.js';
import { yamlScalar } from '../init/yaml-text.js';

/**
 * Cells written so that YAML 1.1 readers (PyYAML, Ruby, SnakeYAML) read them as the strings they are too — a date
 * `1975-07-03`, `yes`, `off`, `10:30` quoted — not only the `yaml` package that `care-etl test` reads them with.
 */
const YAML_1_1_SAFE = { compat: 'yaml-1.1' } as const;

const TEST_FILE = /\.test\.ya?ml$/;

/** The test file of `mappingFile` as `care-etl test <mapping>` finds it: one beside it naming it, else `<stem>.test.yaml`. */
export async function testFileFor(mappingFile: string): Promise<string> {
  const dir = dirname(mappingFile);
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => TEST_FILE.test(n)).sort();
  for (const name of names) {
    const doc = parseDocument(await readFile(join(dir, name), 'utf8').catch(() => ''));
    const mapping = isMap(doc.contents) ? doc.get('mapping') : undefined;
    if (resolve(dir, typeof mapping === 'string' ? mapping : 'mapping.yaml') === mappingFile) return join(dir, name);
  }
  return join(dir, `${basename(mappingFile).replace(/\.ya?ml$/, '')}.test.yaml`);
}

/** Why a row cannot be a case, or undefined. */
function notACase(row: RowInContext['row']): string | undefined {
  if (row.status === 'rejected' && row.rejectedBy?.stage === 'source') return 'the source reader rejected this record: it has no row to test';
  if (row.rejectedBy?.code === 'duplicate-key') return 'a duplicate key is rejected only after the earlier row of that key: one row alone would pass';
  return undefined;
}

/** The case, as plain data in the order a reader expects its keys. */
export function caseOf(at: RowInContext, name: string, text: string, now: Date): Record<string, unknown> {
  const { row, rows, compiled, resource } = at;
  const c: Record<string, unknown> = { name, resource };
  const refs = compiled.resources.get(resource)!.refs;
  if (refs.length) c.refs = Object.fromEntries(refs.map((r) => [r, 'auto']));
  if (text.includes('$now')) c.now = now.toISOString();
  c.input = row.group ? row.group.map((i) => rows[i]!.input) : row.input;
  if (row.status === 'loaded') c.expect = row.resource;
  else if (row.status === 'rejected') c.reject = { stage: row.rejectedBy!.stage, code: row.rejectedBy!.code };
  else c.count = 0;
  return c;
}

function uniqueName(base: string, taken: ReadonlySet<string>): string {
  if (!taken.has(base)) return base;
  let n = 2;
  while (taken.has(`${base} #${n}`)) n++;
  return `${base} #${n}`;
}

function caseNames(doc: Document): Set<string> {
  const cases = doc.get('cases');
  const names = new Set<string>();
  if (isSeq(cases)) for (const c of cases.items) if (isMap(c) && typeof c.get('name') === 'string') names.add(c.get('name') as string);
  return names;
}

/** `text` with `c` after the last case, or undefined when the file has no block list of cases to extend. */
function spliced(text: string, doc: Document, c: Record<string, unknown>): string | undefined {
  const cases = doc.get('cases', true);
  if (!isSeq(cases) || cases.flow || !cases.items.length || !cases.range) return undefined;
  const first = (cases as YAMLSeq).items[0] as { range?: [number, number, number] };
  if (!first.range) return undefined;
  const lineStart = text.lastIndexOf('\n', first.range[0] - 1) + 1;
  const indent = /^ */.exec(text.slice(lineStart))![0];
  const end = cases.range[1];
  const cut = text.indexOf('\n', Math.max(end - 1, 0));
  const at = cut === -1 ? text.length : cut + 1;
  const block = new Document([c], YAML_1_1_SAFE).toString({ lineWidth: 0 });
  const lines = block
    .replace(/\n$/, '')
    .split('\n')
    .map((l) => `${indent}${l}`);
  const before = text.slice(0, at);
  return `${before}${before.endsWith('\n') ? '' : '\n'}\n${lines.join('\n')}\n${text.slice(at)}`;
}

/** Whether `text` parses to a test file whose last case is `c`. */
function endsWith(text: string, c: Record<string, unknown>): boolean {
  const doc = parseDocument(text);
  if (doc.errors.length) return false;
  const cases = (doc.toJS() as { cases?: unknown[] } | null)?.cases;
  return Array.isArray(cases) && JSON.stringify(cases.at(-1)) === JSON.stringify(c);
}

function newFile(mappingFile: string): string {
  return [
    `# Test cases of ${basename(mappingFile)} (added by \`care-etl studio\`); run them with: care-etl test ${basename(mappingFile)}`,
    `mapping: ${yamlScalar(basename(mappingFile))}`,
    'cases:',
    '',
  ].join('\n');
}

/** Appends the case of `at.row` to `testFile` (created if missing; mode 0600: it holds row data). */
export async function addTestCase(
  testFile: string,
  mappingFile: string,
  at: RowInContext,
  text: string,
  now: Date,
): Promise<{ name: string } | { problem: string }> {
  const problem = notACase(at.row);
  if (problem) return { problem };
  const existing = await readFile(testFile, 'utf8').catch((err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? undefined : Promise.reject(err)));
  const before = existing ?? newFile(mappingFile);
  const doc = parseDocument(before, YAML_1_1_SAFE);
  if (doc.errors.length) return { problem: `${basename(testFile)} is not valid YAML: fix it first (${doc.errors[0]!.message.split('\n')[0]})` };
  const name = uniqueName(`${at.resource} line ${at.row.line}`, caseNames(doc));
  const c = caseOf(at, name, text, now);
  let after = existing !== undefined ? spliced(before, doc, c) : undefined;
  if (after === undefined || !endsWith(after, c)) {
    // No block list to extend (a new file, `cases: []`, no `cases:`): through the document, comments kept.
    if (!isSeq(doc.get('cases', true))) doc.set('cases', doc.createNode([]));
    const seq = doc.get('cases', true) as YAMLSeq;
    seq.flow = false;
    const node = doc.createNode(c);
    if (seq.items.length) node.spaceBefore = true;
    seq.items.push(node);
    after = doc.toString({ lineWidth: 0 });
  }
  await writeFileAtomic(testFile, after, 0o600);
  return { name };
}
