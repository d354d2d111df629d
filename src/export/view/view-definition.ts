/**
 * A SQL-on-FHIR v2 ViewDefinition, checked and compiled once, before anything is fetched: every problem is an
 * issue naming the view file and the JSON path of the element (`select[0].column[2].path`), all of them in one
 * CareEtlError (exit 2). Supported: `constant`, `where`, `select` with `column` (name, path, type, collection),
 * nested `select`, `forEach`, `forEachOrNull`, `unionAll`. Not supported (refused by name): `repeat`, `%rowIndex`.
 */
import { CareEtlError, ExitCode, issue, type Issue } from '../../core/issues.js';
import { FhirPathSyntaxError, parseFhirPath, type FhirPathNode } from './fhirpath-parse.js';

export interface ViewColumn {
  name: string;
  /** FHIR type name as declared (`string`, `integer`, `dateTime`…), if any. */
  type?: string;
  collection: boolean;
  path: FhirPathNode;
  /** JSON path of the column in the view (`select[0].column[1]`), for runtime errors. */
  at: string;
}

export interface ViewSelect {
  /** JSON path of the select in the view (`select[1]`; '' for the view itself). */
  at: string;
  forEach?: FhirPathNode;
  /** `forEachOrNull`: one row of nulls when the collection is empty. */
  orNull: boolean;
  columns: ViewColumn[];
  selects: ViewSelect[];
  unionAll: ViewSelect[];
  /** Every column this select produces, in order (its own, its selects', then its unionAll's). */
  names: string[];
}

export interface CompiledView {
  name?: string;
  resource: string;
  constants: ReadonlyMap<string, unknown>;
  where: { path: FhirPathNode; at: string }[];
  root: ViewSelect;
  columns: ViewColumn[];
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
/** `a` → `a.`; the root select has no path of its own. */
const dot = (at: string) => (at ? `${at}.` : '');
const COLUMN_NAME = /^[A-Za-z][A-Za-z0-9_]*$/;
const SELECT_KEYS = new Set(['column', 'select', 'forEach', 'forEachOrNull', 'unionAll', 'repeat']);

/** Collects the issues of one view file. */
class ViewChecker {
  readonly issues: Issue[] = [];
  readonly constants = new Map<string, unknown>();
  constructor(readonly file: string) {}

  fail(path: string, message: string, code: 'view-invalid' | 'view-unsupported' = 'view-invalid'): void {
    this.issues.push(issue.error(code, message, { path, location: { file: this.file } }));
  }

  /** A FHIRPath expression at `path`, parsed and checked (functions' type arguments, constants); undefined when refused. */
  expression(value: unknown, path: string): FhirPathNode | undefined {
    if (typeof value !== 'string' || value.trim() === '') {
      this.fail(path, `expected a FHIRPath expression (text), got ${JSON.stringify(value) ?? 'nothing'}`);
      return undefined;
    }
    try {
      const node = parseFhirPath(value);
      const problem = this.check(node);
      if (problem) throw problem;
      return node;
    } catch (err) {
      if (!(err instanceof FhirPathSyntaxError)) throw err;
      const code = /not supported/.test(err.message) ? 'view-unsupported' : 'view-invalid';
      this.fail(path, `${err.message} at character ${err.at + 1} of \`${value}\``, code);
      return undefined;
    }
  }

  /** What the parser cannot see: type-name arguments, `ofType` only after an element name, constants defined. */
  check(node: FhirPathNode): FhirPathSyntaxError | undefined {
    const children: FhirPathNode[] = [];
    if (node.kind === 'constant' && node.name !== 'resource' && node.name !== 'rootResource') {
      if (node.name === 'rowIndex') return new FhirPathSyntaxError('`%rowIndex` is not supported', node.at);
      if (!this.constants.has(node.name)) return new FhirPathSyntaxError(`the constant \`%${node.name}\` is not defined in \`constant\``, node.at);
    }
    if (node.kind === 'call') {
      const typeArg = node.name === 'ofType' || node.name === 'getReferenceKey';
      if (typeArg && node.args[0] && !(node.args[0].kind === 'member' && node.args[0].base === undefined))
        return new FhirPathSyntaxError(
          `\`${node.name}()\` takes a type name, e.g. \`${node.name}(${node.name === 'ofType' ? 'Quantity' : 'Patient'})\``,
          node.at,
        );
      if (node.name === 'ofType' && node.base?.kind !== 'member')
        return new FhirPathSyntaxError('`ofType()` is supported only right after an element name (`value.ofType(Quantity)`)', node.at);
      if (node.base) children.push(node.base);
      if (!typeArg) children.push(...node.args);
    }
    if (node.kind === 'member' && node.base) children.push(node.base);
    if (node.kind === 'index') children.push(node.base, node.index);
    if (node.kind === 'binary') children.push(node.left, node.right);
    for (const c of children) {
      const p = this.check(c);
      if (p) return p;
    }
    return undefined;
  }

  readConstants(value: unknown): void {
    if (value === undefined) return;
    if (!Array.isArray(value)) return this.fail('constant', 'expected a list of { name, value[x] }');
    value.forEach((c, i) => {
      const at = `constant[${i}]`;
      const name = isObject(c) ? c.name : undefined;
      if (typeof name !== 'string' || !COLUMN_NAME.test(name)) return this.fail(`${at}.name`, 'expected a name (letters, digits, _)');
      const keys = Object.keys(c as object).filter((k) => /^value[A-Z]/.test(k));
      if (keys.length !== 1) return this.fail(at, `expected exactly one value[x] (valueString, valueInteger…) for \`${name}\`, got ${keys.length}`);
      this.constants.set(name, (c as Record<string, unknown>)[keys[0]!]);
    });
  }

  column(c: unknown, at: string, seen: Set<string>): ViewColumn | undefined {
    if (!isObject(c)) return void this.fail(at, 'expected a column { name, path }');
    const name = c.name;
    if (typeof name !== 'string' || !COLUMN_NAME.test(name)) return void this.fail(`${at}.name`, 'expected a column name: a letter, then letters, digits or _');
    if (seen.has(name)) this.fail(`${at}.name`, `the column \`${name}\` is defined twice`);
    seen.add(name);
    if (c.type !== undefined && typeof c.type !== 'string') this.fail(`${at}.type`, 'expected a FHIR type name');
    if (c.collection !== undefined && typeof c.collection !== 'boolean') this.fail(`${at}.collection`, 'expected true or false');
    const path = this.expression(c.path, `${at}.path`);
    return path && { name, type: c.type as string | undefined, collection: c.collection === true, path, at };
  }

  select(s: unknown, at: string, seen: Set<string>): ViewSelect {
    const out: ViewSelect = { at, orNull: false, columns: [], selects: [], unionAll: [], names: [] };
    if (!isObject(s)) return (this.fail(at, 'expected a select { column, select, forEach, forEachOrNull, unionAll }'), out);
    for (const k of Object.keys(s)) if (!SELECT_KEYS.has(k)) this.fail(`${dot(at)}${k}`, `unknown key \`${k}\` in a select`);
    if (s.repeat !== undefined) this.fail(`${dot(at)}repeat`, '`repeat` is not supported', 'view-unsupported');
    if (s.forEach !== undefined && s.forEachOrNull !== undefined) this.fail(at, 'expected `forEach` or `forEachOrNull`, got both');
    const each = s.forEach ?? s.forEachOrNull;
    if (each !== undefined) out.forEach = this.expression(each, `${dot(at)}${s.forEach !== undefined ? 'forEach' : 'forEachOrNull'}`);
    out.orNull = s.forEachOrNull !== undefined;
    this.list(s.column, `${dot(at)}column`).forEach((c, i) => {
      const col = this.column(c, `${dot(at)}column[${i}]`, seen);
      if (col) out.columns.push(col);
    });
    out.names.push(...out.columns.map((c) => c.name));
    this.list(s.select, `${dot(at)}select`).forEach((sub, i) => {
      out.selects.push(this.select(sub, `${dot(at)}select[${i}]`, seen));
      out.names.push(...out.selects.at(-1)!.names);
    });
    this.unionAll(s.unionAll, at, out, seen);
    const declared = [s.column, s.select, s.unionAll].some((l) => Array.isArray(l) && l.length > 0);
    if (!declared) this.fail(at || 'select', 'expected at least one column (`column`, `select` or `unionAll`)');
    return out;
  }

  /** Every branch of a unionAll has the same columns, in the same order (they name the same output columns). */
  unionAll(value: unknown, at: string, out: ViewSelect, seen: Set<string>): void {
    const branches = this.list(value, `${dot(at)}unionAll`);
    const before = new Set(seen); // each branch names the same columns: checked against the others' only once
    branches.forEach((b, i) => out.unionAll.push(this.select(b, `${dot(at)}unionAll[${i}]`, i === 0 ? seen : new Set(before))));
    const first = out.unionAll[0]?.names ?? [];
    out.unionAll.forEach((b, i) => {
      if (b.names.join(',') !== first.join(','))
        this.fail(
          `${dot(at)}unionAll[${i}]`,
          `expected the same columns in the same order as unionAll[0] (${first.join(', ')}), got ${b.names.join(', ') || 'none'}`,
        );
    });
    out.names.push(...first);
  }

  list(value: unknown, at: string): unknown[] {
    if (value === undefined) return [];
    if (Array.isArray(value)) return value;
    this.fail(at, 'expected a list');
    return [];
  }
}

function allColumns(s: ViewSelect, out: ViewColumn[] = []): ViewColumn[] {
  out.push(...s.columns);
  for (const sub of s.selects) allColumns(sub, out);
  if (s.unionAll[0]) allColumns(s.unionAll[0], out);
  return out;
}

/**
 * The compiled view, or one CareEtlError (exit 2) listing every problem. `resource` (e.g. `Observation`): the
 * resource type the caller reads; a view over another type is refused.
 */
export function compileView(view: unknown, file: string, opts: { resource?: string } = {}): CompiledView {
  const c = new ViewChecker(file);
  if (!isObject(view)) throw viewError(file, [issue.error('view-invalid', 'expected a ViewDefinition (a JSON object)', { location: { file } })]);
  if (view.resourceType !== undefined && view.resourceType !== 'ViewDefinition')
    c.fail('resourceType', `expected \`ViewDefinition\`, got ${JSON.stringify(view.resourceType)}`);
  if (typeof view.resource !== 'string' || view.resource === '') c.fail('resource', 'expected the resource type the view reads, e.g. `Observation`');
  else if (opts.resource && view.resource !== opts.resource)
    c.fail('resource', `expected \`${opts.resource}\` (care-etl exports Observations), got \`${view.resource}\``, 'view-unsupported');
  c.readConstants(view.constant);
  const where = c.list(view.where, 'where').flatMap((w, i) => {
    const path = c.expression(isObject(w) ? w.path : undefined, `where[${i}].path`);
    return path ? [{ path, at: `where[${i}].path` }] : [];
  });
  if (view.select === undefined) c.fail('select', 'expected `select`: a list of selects with columns');
  const root = c.select({ select: view.select ?? [] }, '', new Set());
  if (c.issues.length) throw viewError(file, c.issues);
  return {
    name: typeof view.name === 'string' ? view.name : undefined,
    resource: view.resource as string,
    constants: c.constants,
    where,
    root,
    columns: allColumns(root),
  };
}

function viewError(file: string, issues: Issue[]): CareEtlError {
  return new CareEtlError(`The ViewDefinition ${file} cannot be used (${issues.length} problem${issues.length === 1 ? '' : 's'}); nothing was fetched`, {
    issues,
    exitCode: ExitCode.config,
    hint: 'Fix the named elements; the supported FHIRPath subset is in docs/export-views.md.',
  });
}
