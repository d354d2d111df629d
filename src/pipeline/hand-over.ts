/**
 * The one place an Issue becomes text for whatever is handed over or printed: rejects.summary.csv, the HTML and
 * Markdown reports, the terminal's reject lines. Such text must not be able to carry a cell value, so messages
 * that can — a mapping's own `$error` / `$assert` text, JSONata messages that quote the offending value, an ajv
 * message naming a property the map made from a cell — are replaced by value-free templates naming the code and
 * the expression's file:line:col; a server's own text (`serverText`, src/api/outcome.ts) by its code and path. The full
 * message stays in the rejects file (0600), which holds the row anyway.
 */
import { basename } from 'node:path';
import { formatLocation, type Issue } from '../core/issues.js';

export interface HandOverOptions {
  /** Where the full message is (the rejects file); named by its file name. */
  rejectsFile?: string;
  /** Where the referenced row's own reject is (`data/patients.csv line 33`), for a `ref-rejected` consequence. */
  causeOf?: (mapping: string, key: string) => string | undefined;
}

/** An issue as handed over: the clinic's sentence (`column DOB: …`) in `message`, the mapping's jargon in `detail`. */
export interface HandedOverIssue extends Issue {
  /** The mapping, its expression's role and position, a hint in the mapping's terms: a second line / column. */
  detail?: string;
}

/**
 * JSONata runtime errors whose message template embeds a value (`{{value}}`, `{{value2}}`, `{{exp}}`): the same
 * sentence without it. Codes not listed name only operators, functions, argument numbers and types.
 */
const VALUE_FREE_JSONATA: Readonly<Record<string, string>> = {
  D1001: 'a number is out of range',
  D1002: 'cannot negate a value that is not a number',
  T1003: 'a key in an object constructor must evaluate to a string',
  D1009: 'several key definitions of an object constructor evaluate to the same key',
  D1013: 'an object property name starts with _jsonata_ (reserved)',
  T2007: 'type mismatch when comparing values in an order-by clause',
  T2009: 'the values either side of an operator must be of the same data type',
  T2011: 'the insert/update clause of the transform expression must evaluate to an object',
  T2012: 'the delete clause of the transform expression must evaluate to a string or array of strings',
  D2014: 'the range operator (..) would allocate a sequence larger than allowed',
  D2015: 'the maximum sequence length was exceeded',
  D3030: 'unable to cast a value to a number',
  D3060: 'the sqrt function cannot be applied to a negative number',
  D3061: 'the power function has resulted in a value that cannot be represented as a JSON number',
  D3100: 'the radix of the formatBase function must be between 2 and 36',
  D3110: 'the argument of the toMillis function must be an ISO 8601 formatted timestamp',
  D3120: 'syntax error in the expression passed to function eval',
  D3121: 'dynamic error evaluating the expression passed to function eval',
  D3130: 'formatting or parsing an integer as this sequence is not supported',
  D3132: 'unknown component specifier in a date/time picture string',
  D3133: "the 'name' modifier can only be applied to months and days in a date/time picture string",
  D3140: 'malformed URL passed to a URL function',
};

/** JSONata codes whose whole message is the mapping's own text (`$error(message)`, `$assert(cond, message)`). */
const AUTHORED: Readonly<Record<string, string>> = { D3137: '$error', D3141: '$assert' };

/**
 * ``mapping `patient` map: <message> [D3030]``, as `toEvalError` writes an expression's failure: the owner (``mapping
 * `x` ``, ``source `x` ``, ``export `x` column `y` ``) and role are the mapping's own names, kept; the code is optional.
 */
const EXPRESSION_MESSAGE = /^((?:[a-z]+ `[^`\n]*` )+[A-Za-z]+): ([\s\S]*?)(?: \[([A-Z]\d{4})\])?$/;

/** The hand-over text of an unknown property (applying `handOverIssue` twice changes nothing). */
const UNKNOWN_PROPERTY = 'a property the schema does not allow';

/** `mapping.yaml:12:5`: the file name is enough beside the summary's own `file` column. */
function shortLocation(issue: Issue): string {
  const loc = issue.location;
  return loc?.file ? formatLocation({ ...loc, file: basename(loc.file) }) : 'the mapping';
}

/**
 * An issue as it may be handed over: same code and location, a message that cannot carry a cell value and starts
 * with the export's column(s) (`column DOB: not a date in the format MM/DD/YYYY`), the mapping's jargon (its name,
 * the expression's role and position, hints in JSONata) moved to `detail`. Applying it twice changes nothing.
 */
export function handOverIssue(issue: Issue | HandedOverIssue, opts: HandOverOptions = {}): HandedOverIssue {
  if ('detail' in issue) return issue;
  return forTheClinic(valueFree(issue, opts), opts);
}

/** The message (and path) without anything that can carry a cell value. */
function valueFree(issue: Issue, opts: HandOverOptions): Issue {
  const where = opts.rejectsFile ? basename(opts.rejectsFile) : 'the rejects file';
  const message = typeof issue.message === 'string' ? issue.message : String(issue.message);
  if (issue.serverText) {
    // A server's diagnostics may echo the request (the key in any transform, the row): its code and path only.
    return { ...issue, message: `the server's ${issue.code} issue${issue.path ? ` at ${issue.path}` : ''} (its text is in ${where})` };
  }
  if (issue.code === 'jsonata' || issue.code === 'eval-failed') {
    const m = EXPRESSION_MESSAGE.exec(message);
    const prefix = m ? `${m[1]}: ` : '';
    const jsonataCode = m?.[3];
    const tag = jsonataCode ? ` [${jsonataCode}]` : '';
    if (jsonataCode && AUTHORED[jsonataCode]) {
      return { ...issue, message: `${prefix}the mapping's ${AUTHORED[jsonataCode]} at ${shortLocation(issue)} (message in ${where})${tag}` };
    }
    if (jsonataCode && VALUE_FREE_JSONATA[jsonataCode]) return { ...issue, message: `${prefix}${VALUE_FREE_JSONATA[jsonataCode]}${tag}` };
    if (issue.code === 'eval-failed' || !m) {
      return { ...issue, message: `${prefix}the expression at ${shortLocation(issue)} failed (message in ${where})${tag}` };
    }
    return { ...issue, message };
  }
  if (issue.code === 'additionalProperties' && !message.startsWith(UNKNOWN_PROPERTY)) {
    // The property's name is in the path: a map that builds keys from cells (`{ LAST: … }`) names a patient there.
    const parent = issue.path?.replace(/\/[^/]*$/, '') || '/';
    return { ...issue, path: parent, message: `${UNKNOWN_PROPERTY} (its name is in ${where})` };
  }
  if (issue.path === '/resourceType') {
    return { ...issue, message: message.replace(/, got `(?!undefined`|null`)[\s\S]*`$/, ', got another value') };
  }
  return issue;
}

/** `mapping `patient` map: ` / `mapping `patient`: ` at the start of a message: the mapping's own names. */
const OWNER_PREFIX = /^((?:[a-z]+ `[^`\n]*` ?)+(?:[A-Za-z]+)?): /;
/** A JSONata error code at the end (`[D3030]`). */
const JSONATA_TAG = / \[([A-Z]\d{4})\]$/;

/** Hints in the mapping's terms (JSONata to write), moved to the detail line. */
const HINTS: readonly RegExp[] = [
  /; (add it or pass a default: .*)$/,
  / \((use `groupBy` to merge rows)\)$/,
  / \((not in its source, skipped by .*)\)$/,
  / \((pattern \^.*\$)\)$/,
];

/** Phrases reworded for the clinic (the full message in the rejects file keeps the mapping's terms). */
function plainWords(message: string, issue: Issue, opts: HandOverOptions): string {
  if (issue.code === 'ref-rejected' && issue.refersTo) {
    const { mapping, key } = issue.refersTo;
    const place = opts.causeOf?.(mapping, key);
    return `rejected because ${mapping} \`${key}\` was rejected${place ? ` (${place})` : ''}: fix that row first`;
  }
  if (issue.code === 'key-missing' || issue.code === 'key-invalid') {
    return message.replace(
      /^the (group key|key) `[^`\n]*` (is empty or missing in this record)$/,
      (_, what: string) => `empty or missing: it is the row's ${what}`,
    );
  }
  if (issue.code === 'csv-ragged') {
    const m = /^expected (\d+) fields \(([^)]*)\), got (\d+)$/.exec(message);
    if (m) return `${m[3]} values for ${m[1]} columns (${m[2]}): a value holding the delimiter or a quote must be quoted`;
  }
  if (issue.code === 'duplicate-key') {
    return message.replace(
      /^key (`[^`\n]*`) was already used by (line|record) (\d+) of this source; a key must identify one resource$/,
      'the same key $1 as $2 $3: each row needs its own key',
    );
  }
  return message
    .replace(/^the value is not a valid (date|date-time) in format `([^`\n]*)`/, 'not a $1 in the format $2')
    .replace(/^the code \(([^)]*)\) is not in lookup table `([^`\n]*)`/, 'the code ($1) is not in the list `$2`');
}

/** `column DOB`, `columns START, END`, `columns MRN … ZIP` (a row too long for its header). */
function columnsLabel(issue: Issue): string | undefined {
  const cols = issue.columns?.filter((c) => typeof c === 'string' && c !== '');
  if (!cols?.length) return undefined;
  if (issue.code === 'csv-ragged' && cols.length === 2) return `columns ${cols[0]} … ${cols[1]}`;
  return `${cols.length === 1 ? 'column' : 'columns'} ${cols.join(', ')}`;
}

/** The clinic's sentence first (its columns, in plain words), the mapping's jargon after it in `detail`. */
function forTheClinic(issue: Issue, opts: HandOverOptions): HandedOverIssue {
  let message = issue.message;
  const jargon: string[] = [];
  const owner = OWNER_PREFIX.exec(message);
  if (owner) {
    jargon.push(owner[1]!);
    message = message.slice(owner[0].length);
  }
  const tag = JSONATA_TAG.exec(message);
  if (tag) message = message.slice(0, tag.index);
  for (const hint of HINTS) {
    const h = hint.exec(message);
    if (!h) continue;
    message = message.slice(0, h.index);
    jargon.push(h[1]!);
  }
  message = plainWords(message, issue, opts);
  const label = columnsLabel(issue);
  if (label) message = `${label}: ${message}`;
  // a position with a column is the expression's in the mapping file; a row's own place is the summary's line
  const inMapping = issue.location?.file !== undefined && issue.location.column !== undefined;
  if (tag) jargon.push(`[${tag[1]}]`);
  if (inMapping) jargon.push(`at ${shortLocation(issue)}`);
  else if (issue.path) jargon.push(`resource field ${issue.path}`);
  return { ...issue, message, detail: jargon.join(', ') };
}
