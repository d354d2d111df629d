/**
 * A server's OperationOutcome as care-etl keeps it (issue 25, item 3). Only three things are believed to carry no
 * secret and no patient value, so only they reach the ledger, the reports and rejects.summary.csv: the HTTP status,
 * the issue's code (when it is a FHIR issue type) and the field path it names (when every step of it is a property
 * care-etl's resource schemas know). The server's free text (`diagnostics`, `details.text`) may echo anything — the
 * request's headers with the API key in any transform, the body with patient data — so it is kept apart, bounded,
 * on issues marked `serverText`: the full rejects file (0600) holds it; hand-over text names only its code and path.
 */
import { foreignCode, issue, type Issue } from '../core/issues.js';
import { redactKnown, redactValues } from '../core/secret.js';
import { schemaJson } from '../schemas/schema-files.js';

export interface OperationOutcomeIssue {
  severity?: string;
  code?: string;
  diagnostics?: string;
  details?: { text?: string };
  expression?: string[];
}

/** Server issues kept per error, and characters per diagnostic: a reason, not a dump. */
const MAX_SERVER_ISSUES = 20;
const MAX_DIAGNOSTIC = 500;

/** FHIR R4 IssueType codes (hl7.org/fhir/R4/valueset-issue-type.html): any other code is not kept. */
const FHIR_ISSUE_TYPES = new Set(
  (
    'invalid structure required value invariant security login unknown expired forbidden suppressed processing not-supported duplicate ' +
    'multiple-matches not-found deleted too-long code-invalid extension too-costly business-rule conflict transient lock-error no-store ' +
    'exception timeout incomplete throttled informational'
  ).split(' '),
);

const RESOURCE_SCHEMAS = ['patient.schema.json', 'practitioner.schema.json', 'careteam.schema.json', 'observation.schema.json', 'common.schema.json'];
let knownNames: Set<string> | undefined;

/** Every property name of the resource schemas, and the resource type names (a FHIRPath starts with one). */
function propertyNames(): Set<string> {
  if (knownNames) return knownNames;
  const names = new Set(['Patient', 'Practitioner', 'CareTeam', 'Observation']);
  const stack: unknown[] = RESOURCE_SCHEMAS.map((f) => schemaJson(f));
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== 'object') continue;
    const props = (node as { properties?: unknown }).properties;
    if (props && typeof props === 'object' && !Array.isArray(props)) for (const k of Object.keys(props)) names.add(k);
    stack.push(...Object.values(node));
  }
  return (knownNames = names);
}

/**
 * The field path an issue names, if it can be handed over: a JSON pointer (`/name/0/family`, as the sandbox
 * writes it) or a FHIRPath (`Patient.name[0].family`) whose every step is an index or a property of the resource
 * schemas. Anything else (a property named after a cell, a path echoing a header) is not kept.
 */
export function handOverPath(expression: unknown): string | undefined {
  if (typeof expression !== 'string' || expression.length > 200) return undefined;
  const steps = expression.startsWith('/')
    ? expression.slice(1).split('/')
    : /^[A-Za-z][A-Za-z0-9]*(\[\d+\])?(\.[A-Za-z][A-Za-z0-9]*(\[\d+\])?)*$/.test(expression)
      ? expression.replace(/\[\d+\]/g, '').split('.')
      : undefined;
  if (!steps) return undefined;
  const names = propertyNames();
  return steps.every((s) => /^\d{1,6}$/.test(s) || names.has(s)) ? expression : undefined;
}

/** A server's issue code if it is a FHIR issue type, else `server-issue` (the code itself is not kept). */
function handOverCode(code: unknown): Issue['code'] {
  return typeof code === 'string' && FHIR_ISSUE_TYPES.has(code) ? foreignCode(code) : 'server-issue';
}

/**
 * The server's issues: code and path as `handOverCode` / `handOverPath` keep them; the message is the server's
 * text with known secrets and the values this request sent masked, bounded, and marked `serverText`.
 */
export function outcomeToIssues(outcome: OperationOutcomeIssue[] | undefined, sentValues: string[] = []): Issue[] {
  return (outcome ?? [])
    .filter((i) => i !== null && typeof i === 'object')
    .slice(0, MAX_SERVER_ISSUES)
    .map((i) => {
      const raw = i.diagnostics ?? i.details?.text;
      const text = typeof raw === 'string' ? redactValues(redactKnown(raw), sentValues) : 'no details given by the server';
      const path = handOverPath(Array.isArray(i.expression) ? i.expression[0] : undefined);
      const severity = i.severity === 'warning' || i.severity === 'information' || i.severity === 'fatal' ? i.severity : 'error';
      return {
        ...issue.error(handOverCode(i.code), text.length > MAX_DIAGNOSTIC ? `${text.slice(0, MAX_DIAGNOSTIC)}… (${text.length} characters)` : text, { path }),
        severity,
        serverText: true as const,
      };
    });
}

/** The issues as an error message may carry them: `invalid at /birthDate; required at /name` — never their text. */
export function outcomeSummary(issues: Issue[]): string {
  const shown = issues.slice(0, 5).map((i) => `${i.code}${i.path ? ` at ${i.path}` : ''}`);
  return `${shown.join('; ')}${issues.length > 5 ? `; +${issues.length - 5} more` : ''}`;
}
