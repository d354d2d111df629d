/**
 * The field names a `map` writes as literal keys (`"birthdate": …`), checked against the resource's schema when the
 * mapping is loaded: a misspelt field is an error at its `file:line:col` with the allowed names, in `validate` —
 * not a per-row reject whose message must hide the name (a map may build keys from cells).
 * Only object constructors whose place in the resource is certain are checked: the map's result (through blocks,
 * conditions and a path's last step), and the values of checked keys; anything else is left to the row's validation.
 */
import { jsonataExpression } from '../core/jsonata-package.js';
import type { WritableType } from '../schemas/resource-types.js';
import { schemaJson } from '../schemas/schema-files.js';
import { closest } from './closest.js';
import { nodeStart } from './jsonata-ast.js';

interface SchemaNode {
  type?: string | string[];
  pattern?: string;
  enum?: unknown[];
  $ref?: string;
  properties?: Record<string, SchemaNode>;
  additionalProperties?: boolean;
  items?: SchemaNode;
}

interface AstNode {
  type: string;
  value?: unknown;
  position?: number;
  lhs?: unknown;
  expressions?: AstNode[];
  steps?: AstNode[];
  then?: AstNode;
  else?: AstNode;
  procedure?: AstNode;
  arguments?: AstNode[];
  rhs?: AstNode;
}

export interface MapFieldProblem {
  code: 'map-field-unknown' | 'ref-type-mismatch' | 'lookup-value-invalid';
  message: string;
  /** Offset of the key's literal in the expression. */
  offset: number;
  /** Where to fix it when that is not in the expression: the lookup entry (`['lookups', 'gender', 'M']`). */
  yamlPath?: (string | number)[];
}

/** What the map's calls refer to: mapping name → resource type; inline lookup table → its code → label entries. */
export interface MapFieldContext {
  refTypes?: ReadonlyMap<string, string>;
  inlineLookups?: ReadonlyMap<string, Readonly<Record<string, string>>>;
}

const FILES: Record<WritableType, string> = { Patient: 'patient.schema.json', Practitioner: 'practitioner.schema.json', CareTeam: 'careteam.schema.json' };

/**
 * Every literal key of `src`'s certain object constructors that `type`'s schema does not allow, and every
 * `$ref("name", …)` written where the schema wants a reference to another type than mapping `name`'s (`refTypes`);
 * [] on a syntax error.
 */
export function mapFieldProblems(src: string, type: WritableType, context: MapFieldContext = {}): MapFieldProblem[] {
  let ast: AstNode;
  try {
    ast = jsonataExpression(src).ast() as AstNode;
  } catch {
    return []; // the compiler reports it
  }
  const problems: MapFieldProblem[] = [];
  const cx = { src, refTypes: context.refTypes ?? new Map(), inlineLookups: context.inlineLookups ?? new Map(), out: problems };
  checkValue(cx, ast, schemaJson(FILES[type]) as SchemaNode, type);
  return problems;
}

interface Cx {
  src: string;
  refTypes: ReadonlyMap<string, string>;
  inlineLookups: ReadonlyMap<string, Readonly<Record<string, string>>>;
  out: MapFieldProblem[];
}

/**
 * The fields a `match` expression reads from the mapped resource (`subject.refrence`), checked against the type's
 * schema: a path that can never give a value makes every resource unmatched. Paths at the top, in `&` / `=` / … and
 * as function arguments; inside filters they read an element, not the resource, and are left alone.
 */
export function matchFieldProblems(src: string, type: WritableType): MapFieldProblem[] {
  let ast: AstNode;
  try {
    ast = jsonataExpression(src).ast() as AstNode;
  } catch {
    return [];
  }
  const out: MapFieldProblem[] = [];
  const visit = (node: AstNode | undefined): void => {
    if (!node) return;
    if (node.type === 'path') checkPath(src, node.steps ?? [], schemaJson(FILES[type]) as SchemaNode, type, out);
    else if (node.type === 'binary') [node.lhs as AstNode | undefined, node.rhs].forEach(visit);
    // `$ref` / `$sourceKey` / `$lookup` take source keys and codes, not the resource's fields
    else if (node.type === 'function' && !['ref', 'sourceKey', 'lookup'].includes(String(node.procedure?.value))) (node.arguments ?? []).forEach(visit);
  };
  visit(ast);
  return out;
}

function checkPath(src: string, steps: AstNode[], root: SchemaNode, at: string, out: MapFieldProblem[]): void {
  let schema: SchemaNode | undefined = root;
  for (const step of steps) {
    if (step.type !== 'name' || typeof step.value !== 'string' || !schema) return;
    const element: SchemaNode | undefined = isArray(schema) ? schema.items && resolve(schema.items) : schema;
    const props = element?.properties;
    if (!props) return;
    if (!Object.hasOwn(props, step.value)) {
      if (element.additionalProperties !== false) return;
      const names = Object.keys(props).filter((p) => p !== 'meta');
      const near = closest(step.value, names);
      out.push({
        code: 'map-field-unknown',
        message: `${at} has no field \`${step.value}\`${near ? `; did you mean \`${near}\`?` : ''} (fields: ${names.join(', ')}): this match never gives a value`,
        offset: nodeStart(src, step as Parameters<typeof nodeStart>[1]),
      });
      return;
    }
    schema = resolve(props[step.value]!);
    at = `${at}.${step.value}`;
  }
}

/** `node` produces a value of `schema` (an array's items when it is an array). */
function checkValue(cx: Cx, node: AstNode | undefined, schema: SchemaNode | undefined, at: string): void {
  if (!node || !schema) return;
  const element = isArray(schema) ? schema.items && resolve(schema.items) : schema;
  switch (node.type) {
    case 'block':
      return checkValue(cx, node.expressions?.at(-1), schema, at);
    case 'condition':
      checkValue(cx, node.then, schema, at);
      return checkValue(cx, node.else, schema, at);
    case 'path':
      return checkValue(cx, node.steps?.at(-1), schema, at);
    case 'unary':
      if (node.value === '[') for (const e of node.expressions ?? []) checkValue(cx, e, element, at);
      else if (node.value === '{' && Array.isArray(node.lhs)) checkObject(cx, node.lhs as [AstNode, AstNode][], element, at);
      return;
    case 'function':
      checkLookupLabels(cx, node, schema, at);
      return checkRefType(cx, node, schema, at);
    default:
  }
}

/** `"reference": $ref("practitioner", …)` where the schema wants `Patient/<id>`: mapping `practitioner` gives Practitioner ones. */
function checkRefType(cx: Cx, call: AstNode, schema: SchemaNode, at: string): void {
  const [name] = call.arguments ?? [];
  if (call.procedure?.type !== 'variable' || call.procedure.value !== 'ref' || name?.type !== 'string' || typeof name.value !== 'string') return;
  const wanted = /^\^([A-Z]\w+)\//.exec(schema.pattern ?? '')?.[1];
  const given = cx.refTypes.get(name.value);
  if (!wanted || !given || wanted === given) return;
  cx.out.push({
    code: 'ref-type-mismatch',
    message: `${at} must refer to a ${wanted}, but mapping \`${name.value}\` loads ${given}s: \`$ref("${name.value}", …)\` gives \`${given}/<id>\`; refer to a ${wanted} mapping`,
    offset: nodeStart(cx.src, name as Parameters<typeof nodeStart>[1]),
  });
}

/** `"gender": $lookup($gender, SEX)` with `gender: { M: männlich }`: a label the field's value set lacks, at the lookup entry. */
function checkLookupLabels(cx: Cx, call: AstNode, schema: SchemaNode, at: string): void {
  const [table] = call.arguments ?? [];
  if (call.procedure?.type !== 'variable' || call.procedure.value !== 'lookup' || table?.type !== 'variable' || !schema.enum) return;
  const name = String(table.value);
  const entries = cx.inlineLookups.get(name);
  if (!entries) return;
  const allowed = schema.enum.map(String);
  for (const [code, label] of Object.entries(entries)) {
    // a TODO marker is reported as such; a blank label leaves the field out (the resource is pruned): `U: ""` is valid
    if (allowed.includes(label) || label.startsWith('$TODO(') || label.trim() === '') continue;
    const near = closest(label, allowed);
    cx.out.push({
      code: 'lookup-value-invalid',
      message: `lookup \`${name}\` gives \`${label}\` for \`${code}\`, which ${at} (fed by \`$lookup($${name}, …)\`) does not allow: ${allowed.join(', ')}${near ? `; did you mean \`${near}\`?` : ''}`,
      offset: nodeStart(cx.src, call as Parameters<typeof nodeStart>[1]),
      yamlPath: ['lookups', name, code],
    });
  }
}

function checkObject(cx: Cx, pairs: [AstNode, AstNode][], schema: SchemaNode | undefined, at: string): void {
  const props = schema?.properties;
  if (!props) return;
  for (const [key, value] of pairs) {
    if (key.type !== 'string' || typeof key.value !== 'string') continue; // a computed key: known only per row
    const name = key.value;
    if (Object.hasOwn(props, name)) {
      checkValue(cx, value, resolve(props[name]!), `${at}.${name}`);
      continue;
    }
    if (schema.additionalProperties !== false) continue;
    const names = Object.keys(props).filter((p) => p !== 'id' && p !== 'meta');
    const near = closest(name, names);
    cx.out.push({
      code: 'map-field-unknown',
      message: `${at} has no field \`${name}\`${near ? `; did you mean \`${near}\`?` : ''} (fields: ${names.join(', ')})`,
      offset: nodeStart(cx.src, key as Parameters<typeof nodeStart>[1]),
    });
  }
}

function isArray(schema: SchemaNode): boolean {
  return schema.type === 'array' || (Array.isArray(schema.type) && schema.type.includes('array'));
}

/** Follows `$ref`s: `common.schema.json#/$defs/X` from a resource's schema, `#/$defs/X` within common.schema.json. */
function resolve(schema: SchemaNode): SchemaNode | undefined {
  let s: SchemaNode | undefined = schema;
  for (let hops = 0; s?.$ref && hops < 10; hops++) {
    const [refFile, pointer = ''] = s.$ref.split('#');
    let target: unknown = schemaJson(refFile || 'common.schema.json');
    for (const part of pointer.split('/').filter(Boolean)) target = (target as Record<string, unknown> | undefined)?.[part];
    s = target as SchemaNode | undefined;
  }
  return s;
}
