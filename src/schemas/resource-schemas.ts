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
let compiled: Record<ResourceType | 'Bundle', Validator> | undefined;

/** One Ajv instance and one compile per schema, on first use (compiling costs ~tens of ms). */
function load(): Record<ResourceType | 'Bundle', Validator> {
  if (compiled) return compiled;
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
  const out = {} as Record<ResourceType | 'Bundle', Validator>;
  for (const [type, file] of Object.entries(FILES) as [ResourceType | 'Bundle', string][]) {
    const fn = ajv.getSchema(`https://care-etl.dev/schemas/${file}`);
    if (!fn) throw new Error(`care-etl: schema ${file} did not compile`);
    out[type] = wrap(fn);
  }
  compiled = out;
  return out;
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
  const v = load()[type];
  if (!v) throw new Error(`care-etl: unknown resource type ${String(type)}`);
  return v;
}

export function getBundleValidator(): Validator {
  return load().Bundle;
}
