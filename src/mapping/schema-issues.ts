import type { ErrorObject } from 'ajv';
import { issue, type Issue, type Location } from '../core/issues.js';
import { closest } from './closest.js';
import type { YamlLocator } from './yaml-positions.js';

/** ajv reports JSON pointers; the YAML locator wants path segments. */
function fromPointer(pointer: string): string[] {
  return pointer === ''
    ? []
    : pointer
        .slice(1)
        .split('/')
        .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/**
 * A misspelled key (`form:` for `from:`) is one mistake, which ajv reports twice: the unknown key and the
 * missing required one. Drops the `required` error when an unknown key beside it is its closest spelling, so the
 * mapping gets one error, at the typo's line, with "did you mean `from`?".
 */
export function foldMisspelledKeys(errors: ErrorObject[]): ErrorObject[] {
  const unknownAt = new Map<string, string[]>();
  for (const e of errors)
    if (e.keyword === 'additionalProperties') unknownAt.set(e.instancePath, [...(unknownAt.get(e.instancePath) ?? []), String(e.params.additionalProperty)]);
  return errors.filter((e) => {
    if (e.keyword !== 'required') return true;
    const missing = String(e.params.missingProperty);
    return !(unknownAt.get(e.instancePath) ?? []).some((typo) => closest(typo, [missing]) === missing);
  });
}

/** The typo's line as written, e.g. `` — line 7: `form: patients` `` (never under `target:`, where a key may sit beside a secret). */
function shownLine(loc: YamlLocator, at: Location | undefined, instancePath: string): string {
  if (!at?.line || instancePath.startsWith('/target')) return '';
  const text = loc.text.split('\n')[at.line - 1]?.trim() ?? '';
  return text ? ` — line ${at.line}: \`${text.length > 80 ? `${text.slice(0, 77)}…` : text}\`` : '';
}

/** One ajv error → one issue at the YAML node (or key) it is about, with a message for people. */
export function schemaIssue(e: ErrorObject, loc: YamlLocator): Issue {
  const path = fromPointer(e.instancePath);
  const secret = e.instancePath.startsWith('/target/apiKey');
  const params = e.params as Record<string, unknown>;
  const parent = (e.parentSchema ?? {}) as { properties?: Record<string, unknown>; description?: string };
  let location: Location | undefined;
  let pointer = e.instancePath;
  let message: string;
  switch (e.keyword) {
    case 'required': {
      const missing = String(params.missingProperty);
      pointer = `${e.instancePath}/${missing}`;
      message =
        missing === 'key' && e.schemaPath.endsWith('/then/required')
          ? 'missing `key` (the JSONata source key; it may only be left out when `groupBy` is set)'
          : `missing required property \`${missing}\``;
      break;
    }
    case 'additionalProperties': {
      const prop = String(params.additionalProperty);
      const allowed = Object.keys(parent.properties ?? {});
      pointer = `${e.instancePath}/${prop}`;
      location = loc.keyPositionOf([...path, prop]);
      const guess = closest(prop, allowed);
      message = guess
        ? `unknown property \`${prop}\`: did you mean \`${guess}\`?${shownLine(loc, location, e.instancePath)}`
        : `unknown property \`${prop}\`${allowed.length ? `; allowed: ${allowed.join(', ')}` : ''}`;
      break;
    }
    case 'propertyNames': {
      const prop = String(params.propertyName);
      pointer = `${e.instancePath}/${prop}`;
      location = loc.keyPositionOf([...path, prop]);
      message =
        e.instancePath === '/lookups'
          ? `lookup name \`${prop}\` is not a valid variable name: start with a lowercase letter, then letters, digits or _`
          : `name \`${prop}\` is not allowed: start with a lowercase letter, then lowercase letters, digits, _ or -`;
      break;
    }
    case 'enum': {
      const allowed = (params.allowedValues as unknown[]).map(String);
      const got = typeof e.data === 'string' ? e.data : undefined;
      const guess = got ? closest(got, allowed) : undefined;
      message = `must be one of ${allowed.join(', ')}${got !== undefined && !secret ? ` (got \`${got}\`${guess ? `; did you mean \`${guess}\`?` : ''})` : ''}`;
      break;
    }
    case 'const':
      message = `must be ${JSON.stringify(params.allowedValue)}`;
      break;
    case 'type': {
      const want = String(params.type);
      const got = e.data === null ? 'empty' : Array.isArray(e.data) ? 'a list' : typeof e.data;
      const hint =
        want === 'string' && (typeof e.data === 'number' || typeof e.data === 'boolean')
          ? ` — YAML read this value as a ${typeof e.data}; put it in quotes`
          : want === 'string' && e.data === null
            ? ' — the value is empty'
            : '';
      message = `must be ${want === 'object' ? 'a mapping (key: value)' : want === 'array' ? 'a list' : `a ${want}`}, not ${got === 'object' ? 'a mapping' : got}${hint}`;
      break;
    }
    case 'pattern':
      message = `${!secret && typeof e.data === 'string' ? `\`${e.data}\` ` : ''}does not match the expected form ${String(params.pattern)}`;
      break;
    case 'minLength':
    case 'minItems':
    case 'minProperties':
      message = 'must not be empty';
      break;
    case 'maxLength':
      message = `must be at most ${String(params.limit)} character${params.limit === 1 ? '' : 's'}`;
      break;
    case 'anyOf':
    case 'oneOf':
      message = `is not valid: ${parent.description ?? e.message ?? 'no alternative matches'}`;
      break;
    default:
      message = e.message ?? `fails ${e.keyword}`;
  }
  return issue.error(e.keyword === 'required' ? 'required' : 'invalid', message, {
    path: pointer,
    location: location ?? loc.positionOf(path) ?? { file: loc.file },
  });
}
