/**
 * The one reader of care-etl's YAML configuration files — the mapping, its tests (`*.test.yaml`) and `--columns`
 * files: read whole as UTF-8 without a BOM, parsed keeping every node's position (a `LineCounter`), duplicate
 * keys refused, and each YAML error or warning turned into an `Issue` at file:line:col. The data is YAML's
 * `toJS` (aliases bounded); what the data must look like is each caller's business (its JSON Schema).
 */
import { indentationHint } from './yaml-indent-hint.js';
import { LineCounter, isScalar, parseDocument, visit, type Document, type YAMLError, type YAMLWarning } from 'yaml';
import { issue, type Issue } from '../core/issues.js';
import { readTextFile } from '../core/read-text-file.js';
import { YamlLocator } from './yaml-positions.js';

/** Aliases `toJS` expands at most (a "billion laughs" document is an error, not a hang). */
const MAX_ALIASES = 100;

export interface YamlConfig {
  /** The path as given: messages name it. */
  file: string;
  text: string;
  doc: Document.Parsed;
  /** Node positions: `positionOf(['resources', 0, 'map'])` → file:line:col. */
  locator: YamlLocator;
  /** The document as plain data; `undefined` when `errors` is not empty. */
  data: unknown;
  /** Syntax errors, duplicate keys, a document with too many aliases: the file cannot be used. */
  errors: Issue[];
  /** YAML's own warnings (e.g. an unknown tag): the file is usable. */
  warnings: Issue[];
}

export interface ReadYamlConfigOptions {
  /** Names the file in the error of an unreadable one: `cannot read <what> <file> (file not found)`. */
  what: string;
  /**
   * Sees the text before it is parsed: the mapping loader registers a literal API key as a secret there, so
   * no message quoting the YAML can show it.
   */
  beforeParse?: (text: string) => void;
  /** The file's text as an editor holds it (the studio, not yet saved): parsed instead of reading the file; positions are in it. */
  text?: string;
}

/**
 * Reads and parses `file` (resolved against the working directory). An unreadable file throws a CareEtlError
 * (exit 2, see `readTextFile`); YAML problems are returned in `errors` / `warnings` for the caller to report
 * with the rest of its findings.
 */
export async function readYamlConfig(file: string, opts: ReadYamlConfigOptions): Promise<YamlConfig> {
  const text = opts.text ?? (await readTextFile(file, file, opts.what));
  opts.beforeParse?.(text);
  const lineCounter = new LineCounter();
  // yaml's own unique-keys check compares each key with every earlier one (quadratic: a 200k-key lookup took minutes).
  const doc = parseDocument(text, { lineCounter, prettyErrors: true, uniqueKeys: false });
  const locator = new YamlLocator(file, text, doc, lineCounter);
  const errors = withIndentationHints(
    text,
    doc.errors.map((e) => yamlIssue(file, e, 'error')),
  );
  if (errors.length === 0) errors.push(...duplicateKeys(file, doc, lineCounter));
  const warnings = doc.warnings.map((w) => yamlIssue(file, w, 'warning'));
  let data: unknown;
  if (errors.length === 0) {
    try {
      data = doc.toJS({ maxAliasCount: MAX_ALIASES });
    } catch (err) {
      errors.push(issue.error('yaml', (err as Error).message, { location: { file, line: 1, column: 1 } }));
    }
  }
  return { file, text, doc, locator, data, errors, warnings };
}

/** Keys repeated in one mapping (scalars by type and value, as yaml compares them; `<<` merge keys aside), in linear time. */
function duplicateKeys(file: string, doc: Document.Parsed, lineCounter: LineCounter): Issue[] {
  const issues: Issue[] = [];
  visit(doc, {
    Map(_, map) {
      const seen = new Set<unknown>(); // by value: `1` and `"1"` differ, as in yaml's own check
      for (const pair of map.items) {
        if (!isScalar(pair.key) || pair.key.value === '<<') continue;
        if (!seen.has(pair.key.value)) {
          seen.add(pair.key.value);
          continue;
        }
        const at = lineCounter.linePos(pair.key.range?.[0] ?? 0);
        const message = `Map keys must be unique: \`${String(pair.key.value)}\` appears twice (DUPLICATE_KEY)`;
        issues.push(issue.error('yaml', message, { location: { file, line: at.line, column: at.col } }));
      }
    },
  });
  return issues;
}

/** A YAML error as an issue: its first line without yaml's own "at line L, column C" (the location says it), and its code. */
function yamlIssue(file: string, e: YAMLError | YAMLWarning, severity: 'error' | 'warning'): Issue {
  return issue[severity]('yaml', `${e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '')} (${e.code})`, {
    location: e.linePos ? { file, line: e.linePos[0].line, column: e.linePos[0].col } : { file },
  });
}

/** Errors given an indentation hint: each hint reads the whole file, and a mis-indented 8,000-line lookup (4,000 errors) took 4.4 s. */
const HINTED_ERRORS = 20;

/** The first error near a line whose indentation is off says so (once per such line; among the first HINTED_ERRORS). */
function withIndentationHints(text: string, issues: Issue[]): Issue[] {
  const hinted = new Set<string>();
  return issues.map((i, n) => {
    const hint = i.location?.line && n < HINTED_ERRORS ? indentationHint(text, i.location.line) : '';
    if (!hint || hinted.has(hint)) return i;
    hinted.add(hint);
    return { ...i, message: `${i.message} — ${hint}` };
  });
}

const MODELINE = /^#\s*yaml-language-server:\s*\$schema=/m;

/**
 * "Described in schemas/<schema>" plus, only for a file without the editor modeline in its first lines, how to add
 * it — a hint never repeats advice the user already followed.
 */
export function schemaHint(text: string, schema: string, lead = ''): string {
  const base = `${lead}${lead ? ' ' : ''}Every key is described in schemas/${schema}`;
  return MODELINE.test(text.split('\n', 5).join('\n'))
    ? `${base}.`
    : `${base} (add \`# yaml-language-server: $schema=<path>/schemas/${schema}\` as the first line for completion in your editor).`;
}
