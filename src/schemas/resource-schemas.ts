import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsImport from 'ajv-formats';
import { foreignCode, issue, type Issue } from '../core/issues.js';
import type { ResourceType } from './resource-types.js';
import { schemaJson } from './schema-files.js';
import { CALENDAR_DATE_FORMAT, isCalendarDate } from './calendar-date.js';

export const MAX_ISSUES = 50;

const FILES: Record<ResourceType | 'Bundle', string> = {
  Patient: 'patient.schema.json',
  Practitioner: 'practitioner.schema.json',
  CareTeam: 'careteam.schema.json',
  Observation: 'observation.schema.json',
  Bundle: 'bundle.schema.json',
};

export type Validator = (body: unknown) => Issue[];

const patternNames = new Map<string, string>();
let schemas: Ajv | undefined;
const compiled = new Map<ResourceType | 'Bundle', Validator>();

/** One Ajv instance holding every schema, made on first use; nothing compiled yet. */
function ajvWithSchemas(): Ajv {
  if (schemas) return schemas;
  // allowUnionTypes: participant role codings are ["string","null"] (strict mode forbids unions otherwise).
  const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });
  // ajv-formats' CJS default export is not callable as typed under NodeNext (ajv-validator/ajv-formats#123).
  const addFormats = addFormatsImport as unknown as typeof addFormatsImport.default;
  addFormats(ajv, ['date-time']);
  ajv.addFormat(CALENDAR_DATE_FORMAT, { type: 'string', validate: isCalendarDate });
  const read = (file: string): object => schemaJson(file) as object;
  const common = read('common.schema.json') as { $defs: Record<string, { pattern?: string; description?: string }> };
  // Name the well-known regexes in messages: "must be a FHIR date ..." reads better than the bare regex.
  for (const def of Object.values(common.$defs)) {
    if (def.pattern && def.description) patternNames.set(def.pattern, def.description.replace(/\.$/, ''));
  }
  ajv.addSchema(common);
  for (const file of Object.values(FILES)) ajv.addSchema(read(file));
  return (schemas = ajv);
}

/** One compile per schema, on the first use of its type (compiling costs ~tens of ms: a dry run of patients needs one). */
function load(type: ResourceType | 'Bundle'): Validator {
  let v = compiled.get(type);
  if (v) return v;
  const file = Object.hasOwn(FILES, type) ? FILES[type] : undefined;
  if (!file) throw new Error(`care-etl: unknown resource type ${String(type)}`);
  const fn = ajvWithSchemas().getSchema(`https://care-etl.dev/schemas/${file}`);
  if (!fn) throw new Error(`care-etl: schema ${file} did not compile`);
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
      message = patternNames.has(String(p.pattern))
        ? `must be a ${patternNames.get(String(p.pattern))} (pattern ${String(p.pattern)})`
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
