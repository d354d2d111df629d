/**
 * The rows a compiled ViewDefinition gives for one resource (SQL-on-FHIR v2 "Processing algorithm"): `where`
 * filters the resource; a select's columns, its nested selects and its unionAll multiply out per `forEach`
 * item; `forEachOrNull` over nothing gives one row of nulls. A value a column cannot hold is a `view-eval` error.
 */
import { CareEtlError, ExitCode, issue } from '../../core/issues.js';
import { evaluate, FhirPathEvalError, type EvalEnv } from './fhirpath-eval.js';
import type { CompiledView, ViewColumn, ViewSelect } from './view-definition.js';

type ViewRow = Record<string, unknown>;

/** Thrown when an expression fails on a resource: names the view file, the element's JSON path and the resource id (never a value). */
function evalError(file: string, at: string, resource: Record<string, unknown>, err: unknown): CareEtlError {
  const id = typeof resource.id === 'string' ? resource.id : '(no id)';
  const message = err instanceof Error ? err.message : String(err);
  return new CareEtlError(`The ViewDefinition ${file} failed on ${String(resource.resourceType)} ${id}`, {
    issues: [issue.error('view-eval', message, { path: at, location: { file } })],
    exitCode: ExitCode.config,
    hint: 'A column with several values needs `"collection": true`; a `where` path must give true, false or nothing.',
  });
}

function columnValue(col: ViewColumn, focus: unknown, env: EvalEnv): unknown {
  const values = evaluate(col.path, [focus], env);
  if (col.collection) return values;
  if (values.length > 1)
    throw new FhirPathEvalError(`the column \`${col.name}\` got ${values.length} values: add \`"collection": true\` or pick one (\`first()\`)`);
  return values[0] ?? null;
}

/** Each row of `left` joined with each row of `right` (a cross join). */
function product(left: ViewRow[], right: ViewRow[]): ViewRow[] {
  const out: ViewRow[] = [];
  for (const l of left) for (const r of right) out.push({ ...l, ...r });
  return out;
}

function selectRows(sel: ViewSelect, node: unknown, env: EvalEnv, fail: (at: string, err: unknown) => never): ViewRow[] {
  let foci: unknown[] = [node];
  if (sel.forEach) {
    try {
      foci = evaluate(sel.forEach, [node], env);
    } catch (err) {
      fail(`${sel.at ? `${sel.at}.` : ''}${sel.orNull ? 'forEachOrNull' : 'forEach'}`, err);
    }
    if (foci.length === 0 && sel.orNull) return [Object.fromEntries(sel.names.map((n) => [n, null]))];
  }
  const out: ViewRow[] = [];
  for (const focus of foci) {
    const own: ViewRow = {};
    for (const col of sel.columns) {
      try {
        own[col.name] = columnValue(col, focus, env);
      } catch (err) {
        fail(`${col.at}.path`, err);
      }
    }
    let rows = [own];
    for (const sub of sel.selects) rows = product(rows, selectRows(sub, focus, env, fail));
    if (sel.unionAll.length)
      rows = product(
        rows,
        sel.unionAll.flatMap((branch) => selectRows(branch, focus, env, fail)),
      );
    out.push(...rows);
  }
  return out;
}

/** The rows of one resource: none when it is of another type or a `where` is not true. */
export function viewRows(view: CompiledView, resource: Record<string, unknown>, file: string): ViewRow[] {
  if (resource.resourceType !== view.resource) return [];
  const env: EvalEnv = { resource, constants: view.constants };
  const fail = (at: string, err: unknown): never => {
    if (err instanceof FhirPathEvalError) throw evalError(file, at, resource, err);
    throw err;
  };
  for (const w of view.where) {
    let keep: unknown[] = [];
    try {
      keep = evaluate(w.path, [resource], env);
      if (keep.length > 1 || (keep.length === 1 && typeof keep[0] !== 'boolean'))
        throw new FhirPathEvalError(
          `a \`where\` path must give true, false or nothing, got ${keep.length > 1 ? `${keep.length} values` : `a ${typeof keep[0]}`}`,
        );
    } catch (err) {
      fail(w.at, err);
    }
    if (keep[0] !== true) return [];
  }
  return selectRows(view.root, resource, env, fail);
}
