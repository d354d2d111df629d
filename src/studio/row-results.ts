/**
 * Every sampled row of one resource mapping through the stage a run uses (`transformSource`: where, key, groupBy,
 * duplicate keys, map, pruning, schema validation), with `$ref` stubbed as `care-etl test` stubs `auto` refs —
 * then told back per row: loaded (its resource), rejected (why, and the resource validation refused), or skipped.
 */
import { placeholderId } from '../mapping/placeholder-id.js';
import type { CompiledMapping, CompiledResource, EvalContext } from '../mapping/compile-mapping.js';
import type { SourceItem } from '../sources/open-source.js';
import { transformSource, type TransformItem } from '../transform/transform-source.js';
import { validateResource } from '../validate/resource-validator.js';
import type { RefInfo, RowResult, Totals } from './types.js';

/** A row as the studio keeps it: what the page sees, and what "add as test case" needs. */
export interface EvaluatedRow extends RowResult {
  /** `groupBy`: the indexes of every row of its group (this one included). */
  group?: number[];
  /** A rejected row: the stage and code of its first issue (a test case's `reject:`). */
  rejectedBy?: { stage: string; code: string };
}

/** A row of an evaluation, with what it was evaluated from (for "add as test case"). */
export interface RowInContext {
  row: EvaluatedRow;
  rows: readonly EvaluatedRow[];
  compiled: CompiledMapping;
  resource: string;
}

export interface RowEvaluation {
  rows: EvaluatedRow[];
  totals: Totals;
}

/** `$ref` as `care-etl test` resolves `auto` stubs (src/mapping-tests/run-mapping-tests.ts `stubContext`), each call recorded. */
function recordingContext(mapping: CompiledMapping, now: Date, record: (r: Omit<RefInfo, 'path'>) => void): EvalContext {
  const typeOf = (name: string) => mapping.resources.get(name)?.def.type ?? name;
  return {
    now,
    resolveRef(name, key) {
      const resolvesTo = `${typeOf(name)}/${placeholderId(key)}`;
      record({ target: name, key, resolvesTo });
      return resolvesTo;
    },
    sourceKey(reference) {
      const [type, id] = reference.split('/');
      return id && [...mapping.resources.values()].some((r) => r.def.type === type) ? id : undefined;
    },
  };
}

/** JSON pointers of the places in `v` holding the text `value`. */
function pointersOf(v: unknown, value: string, at = ''): string[] {
  if (v === value) return [at];
  if (v === null || typeof v !== 'object') return [];
  return Object.entries(v).flatMap(([k, x]) => pointersOf(x, value, `${at}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`));
}

function refsIn(resource: unknown, calls: Omit<RefInfo, 'path'>[]): RefInfo[] {
  const out: RefInfo[] = [];
  const seen = new Set<string>();
  for (const c of calls) {
    for (const path of pointersOf(resource, c.resolvesTo).length ? pointersOf(resource, c.resolvesTo) : ['']) {
      const id = `${path}|${c.resolvesTo}`;
      if (seen.has(id)) continue;
      seen.add(id);
      out.push({ path, ...c });
    }
  }
  return out;
}

function baseRow(item: SourceItem, index: number): EvaluatedRow {
  return {
    index,
    line: item.origin.line ?? item.origin.record,
    key: '',
    status: 'skipped',
    input: item.ok ? item.data : {},
    issues: [],
    refs: [],
  };
}

/** Why a row that produced nothing was skipped, in a run's words. */
async function skipReason(res: CompiledResource, row: EvaluatedRow): Promise<string> {
  if (res.evalWhere) {
    try {
      if (!(await res.evalWhere(row.input))) return `skipped: \`where: ${res.def.where?.trim() ?? ''}\` is false for this row (not sent, not a reject)`;
    } catch {
      // its failure is the row's reject, reported on its own
    }
  }
  return res.def.groupBy !== undefined
    ? 'skipped: the map produced nothing for this group (not sent, not a reject)'
    : 'skipped: the map produced nothing for this row (not sent, not a reject)';
}

export async function evaluateRows(mapping: CompiledMapping, resourceName: string, items: readonly SourceItem[], now: Date): Promise<RowEvaluation> {
  const res = mapping.resources.get(resourceName)!;
  const rows = items.map(baseRow);
  let calls: Omit<RefInfo, 'path'>[] = [];
  const ctx = recordingContext(mapping, now, (c) => calls.push(c));
  const quiet = recordingContext(mapping, now, () => undefined);
  let current = -1;
  async function* feed(): AsyncGenerator<SourceItem> {
    for (const [i, item] of items.entries()) {
      current = i;
      calls = [];
      yield item;
    }
  }
  const byLine = new Map<number, number[]>();
  for (const r of rows) byLine.set(r.line, [...(byLine.get(r.line) ?? []), r.index]);
  const grouped = res.def.groupBy !== undefined;
  // A groupBy output names its rows by line; a single row's output comes before the next row is read.
  const rowsOf = (out: TransformItem): number[] => {
    if (!grouped) return [current];
    const found = (out.lines ?? []).flatMap((l) => byLine.get(l) ?? []);
    return found.length ? [...new Set(found)] : [current];
  };
  for await (const out of transformSource(res, feed(), { ctx, validate: validateResource, onSkip: () => (calls = []) })) {
    const indexes = rowsOf(out);
    const refs = calls;
    calls = [];
    const resource = out.ok ? out.resource : out.stage === 'validate' ? await mappedAgain(res, out.row, quiet) : undefined;
    for (const i of indexes) {
      const row = rows[i]!;
      row.key = out.key ?? '';
      row.refs = resource ? refsIn(resource, refs) : [];
      if (resource) row.resource = resource;
      if (grouped) row.group = indexes;
      if (out.ok) row.status = 'loaded';
      else {
        row.status = 'rejected';
        row.issues = out.issues.map((is) => ({ path: is.path ?? '', message: is.message }));
        row.reason = `${out.stage}: ${out.issues.map((is) => is.message).join('; ')}`;
        row.rejectedBy = { stage: out.stage, code: String(out.issues[0]?.code ?? 'invalid') };
      }
    }
  }
  await describeSkips(res, rows);
  const totals: Totals = { sampled: rows.length, loaded: 0, rejected: 0, skipped: 0 };
  for (const r of rows) totals[r.status]++;
  return { rows, totals };
}

/** The resource validation refused (a reject keeps only its row): mapped once more, without recording refs. */
async function mappedAgain(res: CompiledResource, input: unknown, ctx: EvalContext): Promise<object | undefined> {
  try {
    const out = await res.evalMap(input, ctx);
    return out !== null && typeof out === 'object' ? out : undefined;
  } catch {
    return undefined;
  }
}

/** Skipped rows: their reason and, when it can be read, their key (so a search by key finds them too). */
async function describeSkips(res: CompiledResource, rows: EvaluatedRow[]): Promise<void> {
  for (const row of rows) {
    if (row.status !== 'skipped') continue;
    row.reason = await skipReason(res, row);
    try {
      row.key = res.def.groupBy !== undefined && res.evalGroupKey ? await res.evalGroupKey(row.input) : await res.evalKey(row.input);
    } catch {
      row.key = '';
    }
  }
}
