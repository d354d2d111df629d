/**
 * The `lookups:` step of loading a mapping: inline code tables (`{ CODE: label }`) and file tables
 * (`{ path, key, value?, many?, format?, records?, csv? }`, read by lookup-file.ts). Each table becomes the
 * variable `$<name>` of every expression, read with `$lookup` (functions.ts). Problems are pushed as issues at
 * the mapping's nodes; the messages name the lookup, the file and its row / line.
 */
import { resolve } from 'node:path';
import { isMap, isScalar, type Node } from 'yaml';
import { issue, type Issue, type KnownIssueCode } from '../core/issues.js';
import { isObj } from '../core/is-object.js';
import { JSONATA_BUILTINS, LIBRARY_FUNCTIONS } from './functions.js';
import { fileEntryOptions } from './lookup-format.js';
import type { LookupReadOptions } from './lookup-file.js';
import { isIndexedLookup, type LookupTable } from './types.js';
import { toPointer, type DocPath, type YamlLocator } from './yaml-positions.js';

/** What the step needs from the loader (src/mapping/load-mapping.ts). */
interface LookupStepContext {
  file: string;
  /** The mapping's folder: relative paths are resolved from it. */
  dir: string;
  loc: YamlLocator;
  issues: Issue[];
  issueAt(code: KnownIssueCode, message: string, path: DocPath, offset?: number): Issue;
  /** `${VAR}` interpolation of one string scalar; problems are pushed as issues. */
  interp(value: string, path: DocPath): { value: string; ok: boolean };
  read: LookupReadOptions;
}

const RESERVED = new Set<string>([...JSONATA_BUILTINS, ...LIBRARY_FUNCTIONS]);

/** The tables written in the mapping file itself (code → label), as opposed to file tables: their entries have a place in it. */
const INLINE_TABLES = new WeakSet<object>();

export function isInlineTable(table: LookupTable): boolean {
  return INLINE_TABLES.has(table);
}

export async function readLookups(raw: unknown, ctx: LookupStepContext): Promise<Record<string, LookupTable>> {
  const lookups: Record<string, LookupTable> = {};
  if (!isObj(raw)) return lookups;
  try {
    await readEach(raw, lookups, ctx);
  } catch (err) {
    closeLookups(lookups); // an unexpected failure (e.g. the disk is full) leaves no index of the earlier tables open
    throw err;
  }
  return lookups;
}

async function readEach(raw: Record<string, unknown>, lookups: Record<string, LookupTable>, ctx: LookupStepContext): Promise<void> {
  for (const [name, l] of Object.entries(raw)) {
    const base: DocPath = ['lookups', name];
    if (RESERVED.has(name)) {
      ctx.issues.push({
        ...ctx.issueAt('lookup-name', `a lookup cannot be named \`${name}\`: \`$${name}\` is a function; choose another name (e.g. \`${name}Codes\`)`, base),
        location: ctx.loc.keyPositionOf(base) ?? { file: ctx.file },
      });
      continue;
    }
    if (!isObj(l)) continue;
    const table = typeof l.path === 'string' ? await fileTable(name, l, base, ctx) : inlineTable(name, l, base, ctx);
    if (table && typeof l.path !== 'string') INLINE_TABLES.add(table);
    if (table) lookups[name] = table;
  }
}

async function fileTable(name: string, l: Record<string, unknown>, base: DocPath, ctx: LookupStepContext): Promise<LookupTable | undefined> {
  if (typeof l.path !== 'string' || typeof l.key !== 'string') return undefined;
  if (l.value !== undefined && typeof l.value !== 'string') return undefined;
  const r = ctx.interp(l.path, [...base, 'path']);
  if (!r.ok) return undefined;
  const entry = fileEntryOptions(l, r.value);
  for (const p of entry.problems) ctx.issues.push(ctx.issueAt(p.code, `lookup \`${name}\`: ${p.message}`, [...base, ...p.at]));
  if (!entry.options || entry.problems.length > 0) return undefined;
  const { readLookupFile } = await import('./lookup-file.js'); // jsonata and the source readers: only when a file is read
  const res = await (ctx.read.reader ?? readLookupFile)(
    {
      name,
      path: resolve(ctx.dir, r.value),
      shown: r.value,
      ...entry.options,
      key: l.key,
      value: l.value,
      many: l.many === true,
      optional: stringList(l.optional),
    },
    ctx.read,
  );
  for (const p of res.problems) ctx.issues.push(ctx.issueAt(p.code, `lookup \`${name}\`: ${p.message}`, [...base, p.at], p.offset));
  return res.table;
}

function stringList(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
}

function inlineTable(name: string, l: Record<string, unknown>, base: DocPath, ctx: LookupStepContext): LookupTable {
  const table: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const code in l) if (typeof l[code] === 'string') table[code] = l[code];
  // codes YAML reads as numbers/booleans: `01: x` is the number 1 → key "1", not "01"
  const node = ctx.loc.find(base)?.node;
  if (isMap(node)) {
    for (const pair of node.items) {
      const k = pair.key as Node | null;
      if (!isScalar(k) || typeof k.value === 'string') continue;
      const src = ctx.loc.sourceOf(k);
      if (src !== undefined && src !== String(k.value)) {
        ctx.issues.push(
          issue.error(
            'lookup-code-not-text',
            `lookup \`${name}\`: YAML reads the code \`${src}\` as ${typeof k.value === 'number' ? `the number ${String(k.value)}` : `\`${String(k.value)}\``}; quote it: "${src}"`,
            { path: toPointer(base), location: k.range ? ctx.loc.locationAt(k.range[0]) : { file: ctx.file } },
          ),
        );
      }
    }
  }
  return table;
}

/** Closes the on-disk tables of a loaded mapping (their files are removed; in-memory tables need nothing). */
export function closeLookups(lookups: Record<string, LookupTable>): void {
  for (const t of Object.values(lookups)) if (isIndexedLookup(t)) t.close();
}
