import type { ErrorObject, ValidateFunction } from 'ajv';
import { foreignCode, issue, type Issue } from '../core/issues.js';
import { schemaJson } from './schema-files.js';
import { CALENDAR_DATE_FORMAT } from './calendar-date.js';
import { COMMON_SCHEMA_FILE, generatedValidators, RESOURCE_SCHEMA_FILES, resourceAjv, resourceFormats, schemaId, type SchemaName } from './validator-setup.js';
import type { ResourceType } from './resource-types.js';

export const MAX_ISSUES = 50;

export type Validator = (body: unknown) => Issue[];

const compiled = new Map<SchemaName, Validator>();

/**
 * Where the validate functions come from, decided at the first use: the ones built with care-etl (validator-setup.ts),
 * else one ajv holding every schema, each compiled on the first use of its type (~tens of ms each).
 */
let source: ((type: SchemaName) => ValidateFunction | undefined) | undefined;

function validateFunctionOf(type: SchemaName): ValidateFunction | undefined {
  if (!source) {
    const built = generatedValidators('resources', resourceFormats());
    if (built) source = (t) => built[t];
    else {
      const ajv = resourceAjv();
      source = (t) => ajv.getSchema(schemaId(RESOURCE_SCHEMA_FILES[t]));
    }
  }
  return source(type);
}

/** Well-known regexes by name in messages: "must be a FHIR date ..." reads better than the bare regex. */
let patternNamesMap: Map<string, string> | undefined;
function patternNames(): Map<string, string> {
  if (patternNamesMap) return patternNamesMap;
  patternNamesMap = new Map();
  const common = schemaJson(COMMON_SCHEMA_FILE) as { $defs: Record<string, { pattern?: string; description?: string }> };
  for (const def of Object.values(common.$defs)) {
    if (def.pattern && def.description) patternNamesMap.set(def.pattern, def.description.replace(/\.$/, ''));
  }
  return patternNamesMap;
}

function load(type: SchemaName): Validator {
  let v = compiled.get(type);
  if (v) return v;
  if (!Object.hasOwn(RESOURCE_SCHEMA_FILES, type)) throw new Error(`care-etl: unknown resource type ${String(type)}`);
  const fn = validateFunctionOf(type);
  if (!fn) throw new Error(`care-etl: schema ${RESOURCE_SCHEMA_FILES[type]} did not compile`);
  compiled.set(type, (v = wrap(fn)));
  return v;
}

function wrap(fn: ValidateFunction): Validator {
  return (body) => (fn(body) ? [] : toIssues(fn.errors ?? []));
}

/** JSON-pointer segment escaping (RFC 6901), for property names reported by ajv params. */
const seg = (s: string): string => s.replace(/~/g, '~0').replace(/\//g, '~1');

function toIssue(e: ErrorObject): Issue | undefined {
  const p = e.params as Record<string, unknown>;
  let path = e.instancePath;
  let message: string;
  switch (e.keyword) {
    case 'if':
      return undefined; // always paired with the failing "then" branch's own errors
    case 'required':
      path += `/${seg(String(p.missingProperty))}`;
      message = `required property "${String(p.missingProperty)}" is missing`;
      break;
    case 'additionalProperties':
      path += `/${seg(String(p.additionalProperty))}`;
      message = `unknown property "${String(p.additionalProperty)}" is not allowed`;
      break;
    case 'enum':
      message = `must be one of: ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
      break;
    case 'const':
      message = `must be ${JSON.stringify(p.allowedValue)}`;
      break;
    case 'pattern':
      message = patternNames().has(String(p.pattern))
        ? `must be a ${patternNames().get(String(p.pattern))} (pattern ${String(p.pattern)})`
        : `must match pattern ${String(p.pattern)}`;
      break;
    case 'format':
      // Never the value itself: a birth date is patient data.
      message =
        p.format === CALENDAR_DATE_FORMAT
          ? 'must be a calendar date: that day does not exist (a 30th of February, a 31st of April, a 29th of February outside a leap year)'
          : `must match format "${String(p.format)}"`;
      break;
    case 'type':
      message = `must be of type ${Array.isArray(p.type) ? p.type.join(' or ') : String(p.type)}`;
      break;
    default:
      message = e.message ?? e.keyword;
  }
  return issue.error(foreignCode(e.keyword), message, { path: path || '/' });
}

export function toIssues(errors: ErrorObject[]): Issue[] {
  const issues: Issue[] = [];
  for (const e of errors) {
    const found = toIssue(e);
    if (found) issues.push(found);
  }
  if (issues.length <= MAX_ISSUES) return issues;
  // allErrors has no bound: keep the report readable and say how much was left out.
  const rest = issues.length - (MAX_ISSUES - 1);
  return [...issues.slice(0, MAX_ISSUES - 1), issue.error('too-many-issues', `${rest} more issues not shown`)];
}

export function getResourceValidator(type: ResourceType): Validator {
  return load(type);
}

export function getBundleValidator(): Validator {
  return load('Bundle');
}
