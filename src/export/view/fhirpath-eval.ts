/**
 * Evaluates a parsed FHIRPath subset (fhirpath-parse.ts) over plain FHIR JSON: every value is a collection (an
 * array). No FHIR model: a choice element (`value[x]`) is read through `ofType(T)` (`value.ofType(Quantity)` →
 * `valueQuantity`) or, bare, from its `valueX` keys for the choice names in `CHOICE_ELEMENTS`.
 */
import { parseReference } from '../references.js';
import type { FhirPathNode } from './fhirpath-parse.js';

/** What an expression sees besides its focus: the resource (`getResourceKey()`, `%resource`) and the view's constants. */
export interface EvalEnv {
  resource: Record<string, unknown>;
  constants: ReadonlyMap<string, unknown>;
}

/** A runtime failure (more than one value where one is needed, a type mismatch): the caller names the column and the resource. */
export class FhirPathEvalError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FhirPathEvalError';
  }
}

/** Choice elements (`[x]`) of the R4/R5 resources a view over Observation reaches, read bare as their typed keys. */
const CHOICE_ELEMENTS = new Set(['value', 'effective', 'deceased', 'multipleBirth', 'onset', 'abatement', 'occurrence', 'performed', 'identified']);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const upperFirst = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

function pushAll(out: unknown[], v: unknown): void {
  if (v === undefined || v === null) return;
  if (Array.isArray(v)) for (const x of v) pushAll(out, x);
  else out.push(v);
}

function member(focus: readonly unknown[], name: string, root: boolean): unknown[] {
  const out: unknown[] = [];
  for (const item of focus) {
    if (!isObject(item)) continue;
    // `Observation.code`: a leading type name is the resource itself when it is of that type.
    if (root && /^[A-Z]/.test(name) && item.resourceType === name) out.push(item);
    else if (name in item) pushAll(out, item[name]);
    else if (CHOICE_ELEMENTS.has(name))
      for (const k of Object.keys(item)) if (k.length > name.length && k.startsWith(name) && /[A-Z]/.test(k[name.length]!)) pushAll(out, item[k]);
  }
  return out;
}

/** The primitive FHIR types a JSON value can be, for `ofType` on an element that is not a choice. */
function primitiveFits(v: unknown, type: string): boolean {
  if (typeof v === 'boolean') return type === 'boolean';
  if (typeof v === 'number') return type === 'decimal' || (Number.isInteger(v) && /^(integer|integer64|positiveInt|unsignedInt)$/.test(type));
  if (typeof v === 'string') return /^(string|code|id|uri|url|canonical|oid|uuid|markdown|base64Binary|date|dateTime|instant|time)$/.test(type);
  return false;
}

function ofType(node: Extract<FhirPathNode, { kind: 'call' }>, focus: readonly unknown[], env: EvalEnv): unknown[] {
  const type = (node.args[0] as { name: string }).name;
  const elem = node.base as Extract<FhirPathNode, { kind: 'member' }>; // checked by the view compiler
  const owners = elem.base ? evaluate(elem.base, focus, env) : focus;
  const out: unknown[] = [];
  for (const o of owners) {
    if (!isObject(o)) continue;
    pushAll(out, o[elem.name + upperFirst(type)]);
    if (elem.name in o) {
      const plain: unknown[] = [];
      pushAll(plain, o[elem.name]);
      out.push(...plain.filter((v) => primitiveFits(v, type)));
    }
  }
  return out;
}

/** Singleton evaluation as a boolean: empty → undefined; one boolean → itself; one other value → true. */
function toBoolean(c: readonly unknown[], what: string): boolean | undefined {
  if (c.length === 0) return undefined;
  if (c.length > 1) throw new FhirPathEvalError(`${what}: expected one value, got ${c.length}`);
  return typeof c[0] === 'boolean' ? c[0] : true;
}

function single(c: readonly unknown[], op: string): unknown {
  if (c.length > 1) throw new FhirPathEvalError(`\`${op}\` needs one value on each side, got ${c.length}`);
  return c[0];
}

function equal(a: unknown, b: unknown): boolean {
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return a === b;
  return JSON.stringify(a) === JSON.stringify(b);
}

const tidy = (n: number) => Number(n.toPrecision(15)); // 0.1 + 0.2 → 0.3, as a decimal would

function arithmetic(op: string, l: unknown, r: unknown): unknown[] {
  if (op === '+' && typeof l === 'string' && typeof r === 'string') return [l + r];
  if (typeof l !== 'number' || typeof r !== 'number') throw new FhirPathEvalError(`\`${op}\` needs numbers, got ${typeof l} and ${typeof r}`);
  if (op === '+') return [tidy(l + r)];
  if (op === '-') return [tidy(l - r)];
  if (op === '*') return [tidy(l * r)];
  return r === 0 ? [] : [tidy(l / r)];
}

function compare(op: string, l: unknown, r: unknown): boolean {
  if (typeof l !== typeof r || (typeof l !== 'number' && typeof l !== 'string'))
    throw new FhirPathEvalError(`\`${op}\` compares two numbers or two texts, got ${typeof l} and ${typeof r}`);
  const a = l as number | string;
  const b = r as number | string;
  return op === '<' ? a < b : op === '>' ? a > b : op === '<=' ? a <= b : a >= b;
}

function logic(op: string, l: boolean | undefined, r: boolean | undefined): unknown[] {
  let v: boolean | undefined;
  if (op === 'and') v = l === false || r === false ? false : l === true && r === true ? true : undefined;
  else if (op === 'or') v = l === true || r === true ? true : l === false && r === false ? false : undefined;
  else if (op === 'xor') v = l === undefined || r === undefined ? undefined : l !== r;
  else v = l === false || r === true ? true : l === true && r === false ? false : undefined; // implies
  return v === undefined ? [] : [v];
}

function binary(node: Extract<FhirPathNode, { kind: 'binary' }>, focus: readonly unknown[], env: EvalEnv): unknown[] {
  const left = evaluate(node.left, focus, env);
  const right = evaluate(node.right, focus, env);
  const { op } = node;
  if (op === 'and' || op === 'or' || op === 'xor' || op === 'implies') return logic(op, toBoolean(left, `\`${op}\``), toBoolean(right, `\`${op}\``));
  if (left.length === 0 || right.length === 0) return [];
  if (op === '=' || op === '!=') {
    const same = left.length === right.length && left.every((v, i) => equal(v, right[i]));
    return [op === '=' ? same : !same];
  }
  const l = single(left, op);
  const r = single(right, op);
  if (op === '+' || op === '-' || op === '*' || op === '/') return arithmetic(op, l, r);
  return [compare(op, l, r)];
}

function referenceKeys(focus: readonly unknown[], type: string | undefined): unknown[] {
  const out: unknown[] = [];
  for (const item of focus) {
    const ref = parseReference(isObject(item) ? item.reference : undefined);
    if (ref && (type === undefined || ref.type === type)) out.push(ref.id);
  }
  return out;
}

function call(node: Extract<FhirPathNode, { kind: 'call' }>, input: readonly unknown[], env: EvalEnv): unknown[] {
  if (node.name === 'ofType') return ofType(node, input, env);
  const focus = node.base ? evaluate(node.base, input, env) : input;
  const arg = node.args[0];
  const each = (item: unknown) => toBoolean(evaluate(arg!, [item], env), `\`${node.name}()\``) === true;
  switch (node.name) {
    case 'first':
      return focus.slice(0, 1);
    case 'last':
      return focus.slice(-1);
    case 'count':
      return [focus.length];
    case 'exists':
      return [arg ? focus.some(each) : focus.length > 0];
    case 'empty':
      return [focus.length === 0];
    case 'where':
      return focus.filter(each);
    case 'not': {
      const b = toBoolean(focus, '`not()`');
      return b === undefined ? [] : [!b];
    }
    case 'join': {
      const sep = arg ? single(evaluate(arg, input, env), 'join') : '';
      return [focus.map(String).join(typeof sep === 'string' ? sep : '')]; // the suite: nothing joins to ''
    }
    case 'extension': {
      const url = single(evaluate(arg!, input, env), 'extension');
      return member(focus, 'extension', false).filter((e) => isObject(e) && e.url === url);
    }
    case 'getResourceKey':
      return focus.filter((r) => isObject(r) && typeof r.resourceType === 'string' && typeof r.id === 'string').map((r) => (r as { id: string }).id);
    case 'getReferenceKey':
      return referenceKeys(focus, arg ? (arg as { name: string }).name : undefined);
  }
  throw new FhirPathEvalError(`the function \`${node.name}()\` is not supported`);
}

/** The collection `node` gives on `focus` (the current item, or the resource at the top). */
export function evaluate(node: FhirPathNode, focus: readonly unknown[], env: EvalEnv): unknown[] {
  switch (node.kind) {
    case 'literal':
      return [node.value];
    case 'empty':
      return [];
    case 'this':
      return [...focus];
    case 'constant':
      if (node.name === 'resource' || node.name === 'rootResource') return [env.resource];
      return env.constants.has(node.name) ? [env.constants.get(node.name)] : [];
    case 'member':
      return member(node.base ? evaluate(node.base, focus, env) : focus, node.name, node.base === undefined);
    case 'index': {
      const i = single(evaluate(node.index, focus, env), '[]');
      const base = evaluate(node.base, focus, env);
      return typeof i === 'number' && Number.isInteger(i) && i >= 0 && i < base.length ? [base[i]] : [];
    }
    case 'binary':
      return binary(node, focus, env);
    case 'call':
      return call(node, focus, env);
  }
}
