/**
 * The field names a `map` writes as literal keys (`"birthdate": …`), checked against the resource's schema when the
 * mapping is loaded: a misspelt field is an error at its `file:line:col` with the allowed names, in `validate` —
 * not a per-row reject whose message must hide the name (a map may build keys from cells).
 * Only object constructors whose place in the resource is certain are checked: the map's result (through blocks,
 * conditions and a path's last step), and the values of checked keys; anything else is left to the row's validation.
 */
import jsonata from 'jsonata';
import type { WritableType } from '../schemas/resource-types.js';
import { schemaJson } from '../schemas/schema-files.js';
import { closest } from './closest.js';
import { nodeStart } from './jsonata-ast.js';

interface SchemaNode {
  type?: string | string[];
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
}

export interface MapFieldProblem {
  message: string;
  /** Offset of the key's literal in the expression. */
  offset: number;
}

const FILES: Record<WritableType, string> = { Patient: 'patient.schema.json', Practitioner: 'practitioner.schema.json', CareTeam: 'careteam.schema.json' };

/** Every literal key of `src`'s certain object constructors that `type`'s schema does not allow; [] on a syntax error. */
export function mapFieldProblems(src: string, type: WritableType): MapFieldProblem[] {
  let ast: AstNode;
  try {
    ast = jsonata(src).ast() as AstNode;
  } catch {
    return []; // the compiler reports it
  }
  const problems: MapFieldProblem[] = [];
  checkValue(src, ast, schemaJson(FILES[type]) as SchemaNode, type, problems);
  return problems;
}

/** `node` produces a value of `schema` (an array's items when it is an array). */
function checkValue(src: string, node: AstNode | undefined, schema: SchemaNode | undefined, at: string, out: MapFieldProblem[]): void {
  if (!node || !schema) return;
  const element = isArray(schema) ? schema.items && resolve(schema.items) : schema;
  switch (node.type) {
    case 'block':
      return checkValue(src, node.expressions?.at(-1), schema, at, out);
    case 'condition':
      checkValue(src, node.then, schema, at, out);
      return checkValue(src, node.else, schema, at, out);
    case 'path':
      return checkValue(src, node.steps?.at(-1), schema, at, out);
    case 'unary':
      if (node.value === '[') for (const e of node.expressions ?? []) checkValue(src, e, element, at, out);
      else if (node.value === '{' && Array.isArray(node.lhs)) checkObject(src, node.lhs as [AstNode, AstNode][], element, at, out);
      return;
    default:
  }
}

function checkObject(src: string, pairs: [AstNode, AstNode][], schema: SchemaNode | undefined, at: string, out: MapFieldProblem[]): void {
  const props = schema?.properties;
  if (!props) return;
  for (const [key, value] of pairs) {
    if (key.type !== 'string' || typeof key.value !== 'string') continue; // a computed key: known only per row
    const name = key.value;
    if (Object.hasOwn(props, name)) {
      checkValue(src, value, resolve(props[name]!), `${at}.${name}`, out);
      continue;
    }
    if (schema.additionalProperties !== false) continue;
    const names = Object.keys(props).filter((p) => p !== 'id' && p !== 'meta');
    const near = closest(name, names);
    out.push({
      message: `${at} has no field \`${name}\`${near ? `; did you mean \`${near}\`?` : ''} (fields: ${names.join(', ')})`,
      offset: nodeStart(src, key as Parameters<typeof nodeStart>[1]),
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
