import { issue, issuesOf, type Issue } from '../core/issues.js';
import type { CompiledResource } from '../mapping/compile-mapping.js';
import { columnsOfExpression, columnsOfField } from '../mapping/error-columns.js';
import type { EvalContext } from '../mapping/functions.js';
import type { WritableType } from '../schemas/resource-types.js';
import type { Origin, SourceItem } from '../sources/types.js';
import type { Resource } from '../api/types.js';
import type { RejectRecord } from './reject-record.js';
import { KeyIndex } from './key-index.js';

/** A row (or a `groupBy` group of rows) turned into a valid resource. */
export interface MappedResource {
  ok: true;
  mapping: string;
  type: WritableType;
  key: string;
  resource: Resource;
  origin: Origin;
  /** Every row of a group (groupBy); absent for single rows. */
  lines?: number[];
}

export type TransformItem = MappedResource | ({ ok: false } & RejectRecord);

export interface TransformOptions {
  ctx: EvalContext;
  /** Schema validation of the mapped resource (empty = valid). */
  validate: (type: WritableType, resource: unknown) => Issue[];
  /** Called for every source item read (a counter: cheaper than another async generator layer per row). */
  onRead?: () => void;
  /**
   * Called with the number of source rows skipped: left out by `where:` (one row), or whose map produced nothing
   * (one row, or every row of a `groupBy` group). A skipped row is neither yielded nor rejected: not sent, not written.
   */
  onSkip?: (rows: number) => void;
}

function reject(
  stage: RejectRecord['stage'],
  res: CompiledResource,
  origin: Origin,
  issues: Issue[],
  extra: Partial<RejectRecord>,
): { ok: false } & RejectRecord {
  return { ok: false, stage, mapping: res.def.name, source: origin.source, file: origin.file, line: origin.line, record: origin.record, issues, ...extra };
}

/**
 * Source items → mapped, schema-valid resources or rejects, in source order.
 * Evaluations are awaited one after another: JSONata runs ~12× faster that way than with many in flight.
 * A key seen twice is a reject of the later row (never two creates); with `groupBy` the rows of a key are
 * collected first (memory grows with the number of groups, which is why only grouped mappings buffer).
 * Skipped rows (`where:` false, before the key or group key is read; a map producing nothing) are as if absent from
 * the export: their key is neither yielded nor taken, so a later row of that key is no duplicate.
 */
export async function* transformSource(res: CompiledResource, items: AsyncIterable<SourceItem>, opts: TransformOptions): AsyncGenerator<TransformItem> {
  const { def } = res;
  if (def.groupBy !== undefined && res.evalGroupKey) {
    const groups = new Map<string, { rows: Record<string, unknown>[]; origins: Origin[] }>();
    for await (const item of items) {
      opts.onRead?.();
      if (!item.ok) {
        yield reject('source', res, item.origin, item.issues, { raw: item.raw });
        continue;
      }
      let gk: string;
      try {
        if (res.evalWhere && !(await res.evalWhere(item.data))) {
          opts.onSkip?.(1);
          continue;
        }
        gk = await res.evalGroupKey(item.data);
      } catch (err) {
        yield reject('transform', res, item.origin, issuesOf(err, { file: item.origin.file, line: item.origin.line }), { row: item.data });
        continue;
      }
      let g = groups.get(gk);
      if (!g) groups.set(gk, (g = { rows: [], origins: [] }));
      g.rows.push(item.data);
      g.origins.push(item.origin);
    }
    for (const [key, g] of groups) {
      const origin = g.origins[0];
      const lines = g.origins.map((o) => o.line ?? o.record);
      const out = await mapOne(res, g.rows, key, origin, opts, { lines, row: g.rows });
      if (out === SKIPPED) opts.onSkip?.(g.rows.length);
      else yield out;
    }
    return;
  }

  const firstSeen = new KeyIndex();
  for await (const item of items) {
    opts.onRead?.();
    if (!item.ok) {
      yield reject('source', res, item.origin, item.issues, { raw: item.raw });
      continue;
    }
    let key: string;
    try {
      if (res.evalWhere && !(await res.evalWhere(item.data))) {
        opts.onSkip?.(1);
        continue;
      }
      const k = res.keyNow(item.data);
      key = typeof k === 'string' ? k : await k; // no await (a microtask per row) when the key is at hand
    } catch (err) {
      yield reject('transform', res, item.origin, issuesOf(err, { file: item.origin.file, line: item.origin.line }), { row: item.data });
      continue;
    }
    const where = item.origin.line ?? item.origin.record;
    const earlier = firstSeen.get(key);
    if (earlier !== undefined) {
      if (await mapsToNothing(res, item.data, opts)) {
        opts.onSkip?.(1);
        continue;
      }
      yield reject(
        'transform',
        res,
        item.origin,
        [
          issue.error(
            'duplicate-key',
            `key \`${key}\` was already used by ${item.origin.line !== undefined ? 'line' : 'record'} ${earlier} of this source; a key must identify one resource (use \`groupBy\` to merge rows)`,
          ),
        ].map((i) => withColumns(i, columnsOfExpression(res.def.key))),
        { key, row: item.data },
      );
      continue;
    }
    let out = mapOne(res, item.data, key, item.origin, opts, { row: item.data });
    if (out instanceof Promise) out = await out;
    if (out === SKIPPED) {
      opts.onSkip?.(1);
      continue;
    }
    firstSeen.set(key, where);
    yield out;
  }
}

/** `mapOne`'s answer for a map that produced nothing: the row (group) is skipped. */
const SKIPPED: unique symbol = Symbol('skipped');

/** A repeated key's row whose map produces nothing is a skip, not a duplicate; any failure leaves it a duplicate. */
async function mapsToNothing(res: CompiledResource, row: unknown, opts: TransformOptions): Promise<boolean> {
  try {
    return (await res.evalMap(row, opts.ctx)) === undefined;
  } catch {
    return false;
  }
}

type Mapped = TransformItem | typeof SKIPPED;

/** The row's (group's) resource, validated; a plain value when the map ran compiled (no promise per row). */
function mapOne(
  res: CompiledResource,
  input: unknown,
  key: string,
  origin: Origin,
  opts: TransformOptions,
  extra: { lines?: number[]; row: unknown },
): Mapped | Promise<Mapped> {
  const failed = (err: unknown): Mapped => reject('transform', res, origin, issuesOf(err, { file: origin.file, line: origin.line }), { key, ...extra });
  let resource: unknown;
  try {
    resource = res.mapNow(input, opts.ctx);
  } catch (err) {
    return failed(err);
  }
  if (resource instanceof Promise) return resource.then((r: unknown) => checked(res, r, key, origin, opts, extra), failed);
  return checked(res, resource, key, origin, opts, extra);
}

/** The mapped resource validated against its type's schema (a skip when the map produced nothing). */

function checked(
  res: CompiledResource,
  resource: unknown,
  key: string,
  origin: Origin,
  opts: TransformOptions,
  extra: { lines?: number[]; row: unknown },
): Mapped {
  if (resource === undefined) return SKIPPED; // "a map that produces nothing skips the record"
  const issues = opts.validate(res.def.type, resource);
  // a schema error names the columns the map's value at that path reads
  if (issues.length)
    return reject(
      'validate',
      res,
      origin,
      issues.map((i) => withColumns(i, columnsOfField(res.def.map, i.path))),
      { key, ...extra },
    );
  return { ok: true, mapping: res.def.name, type: res.def.type, key, resource: resource as Resource, origin, lines: extra.lines };
}

/** The issue naming `columns` of the export (none found: as it is). */
function withColumns(i: Issue, columns: string[]): Issue {
  return columns.length && !i.columns ? { ...i, columns } : i;
}
