/**
 * Loads a mapping test file (`*.test.yaml`): YAML with positions (`readYamlConfig`) → schemas/mapping-test.schema.json
 * → the rules the schema cannot say nicely (one of input/fixture, …) → numbers YAML would silently change
 * (`000123` → 123). Every problem is collected; one CareEtlError (exit 2) carries them all.
 */
import { dirname, resolve } from 'node:path';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { visit, type Document, type Scalar } from 'yaml';
import { CareEtlError, ExitCode, issue, type Issue, type Location, type KnownIssueCode } from '../core/issues.js';
import { isObj, type Obj } from '../core/is-object.js';
import { foldMisspelledKeys, schemaIssue } from '../mapping/schema-issues.js';
import { readYamlConfig, schemaHint } from '../mapping/yaml-config.js';
import { toPointer, type DocPath, type YamlLocator } from '../mapping/yaml-positions.js';
import { schemaDefault, schemaJson } from '../schemas/schema-files.js';
import type { FixtureDef, MappingTestFile, RefStubs, RejectExpectation, RowSelector, TestCaseDef } from './types.js';

const TEST_SCHEMA = 'mapping-test.schema.json';
const MAX_ISSUES = 50;

let validator: ValidateFunction | undefined;
function testValidator(): ValidateFunction {
  if (!validator) {
    const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, strictRequired: false, allowUnionTypes: true });
    validator = ajv.compile(schemaJson(TEST_SCHEMA) as object);
  }
  return validator;
}

/** Where the issues of one file go, and how a YAML path becomes a location. */
interface Ctx {
  file: string;
  dir: string;
  issues: Issue[];
  at(path: DocPath): Location;
  issueAt(code: KnownIssueCode, message: string, path: DocPath): Issue;
}

export async function loadTestFile(file: string): Promise<MappingTestFile> {
  const abs = resolve(file);
  const dir = dirname(abs);
  const yaml = await readYamlConfig(file, { what: 'test file' });
  const fail = (issues: Issue[]) => {
    if (issues.length > MAX_ISSUES) {
      const more = issues.length - MAX_ISSUES;
      issues = [...issues.slice(0, MAX_ISSUES), issue.invalid(`… and ${more} more problems`, { location: { file } })];
    }
    return new CareEtlError(`test file ${file}: ${issues.length} problem${issues.length === 1 ? '' : 's'}`, {
      issues,
      exitCode: ExitCode.config,
      hint: schemaHint(yaml.text, 'mapping-test.schema.json', 'Fix the listed lines.'),
    });
  };

  if (yaml.errors.length) throw fail(yaml.errors);
  const { data, locator: loc } = yaml;
  const issues: Issue[] = numberIssues(yaml.doc, yaml.text, loc);
  if (!isObj(data)) {
    throw fail([
      issue.invalid('a test file is a YAML mapping with `cases:` (and optionally `mapping:`, `refs:`, `env:`, `now:`)', {
        location: loc.positionOf([]) ?? { file, line: 1, column: 1 },
      }),
    ]);
  }

  const validate = testValidator();
  if (!validate(data)) issues.push(...schemaIssues(validate.errors ?? [], loc));

  const at = (path: DocPath): Location => loc.positionOf(path) ?? { file };
  const ctx: Ctx = { file, dir, issues, at, issueAt: (code, message, path) => issue.error(code, message, { path: toPointer(path), location: at(path) }) };

  const env: Record<string, string> = {};
  if (isObj(data.env)) for (const [k, v] of Object.entries(data.env)) if (typeof v === 'string') env[k] = v;

  const cases: TestCaseDef[] = [];
  const names = new Map<string, number>();
  if (Array.isArray(data.cases)) {
    data.cases.forEach((c: unknown, index: number) => {
      if (isObj(c)) cases.push(parseCase(c, index, names, ctx));
    });
  }

  const mappingFile =
    typeof data.mapping === 'string' ? data.mapping : schemaDefault(TEST_SCHEMA, '/properties/mapping', (v): v is string => typeof v === 'string');
  const result: MappingTestFile = {
    file: abs,
    dir,
    mappingFile: resolve(dir, mappingFile),
    env,
    now: parseNow(data.now, ['now'], ctx),
    refs: parseRefs(data.refs),
    cases,
  };
  if (issues.length) throw fail(issues);
  return result;
}

/** Numbers whose text YAML changes (000123 → 123, 1.50 → 1.5, 1e3 → 1000): CSV cells and ids are text. */
function numberIssues(doc: Document, text: string, loc: YamlLocator): Issue[] {
  const issues: Issue[] = [];
  visit(doc, {
    Scalar(_key, node: Scalar) {
      if (typeof node.value !== 'number' || node.type !== 'PLAIN' || !node.range) return;
      const src = text.slice(node.range[0], node.range[1]).trim();
      if (src !== String(node.value)) {
        issues.push(
          issue.error('number-not-text', `YAML reads \`${src}\` as the number ${String(node.value)}; quote it ("${src}") — source cells and ids are text`, {
            location: loc.locationAt(node.range[0]),
          }),
        );
      }
    },
  });
  return issues;
}

function parseNow(v: unknown, path: DocPath, ctx: Ctx): Date | undefined {
  if (typeof v !== 'string') return undefined;
  const d = new Date(v);
  if (Number.isNaN(d.getTime())) {
    ctx.issues.push(ctx.issueAt('invalid', `\`${v}\` is not a valid instant (e.g. 2026-01-01T00:00:00Z)`, path));
    return undefined;
  }
  return d;
}

function parseRefs(v: unknown): RefStubs {
  const out: RefStubs = {};
  if (!isObj(v)) return out;
  for (const [name, table] of Object.entries(v)) {
    if (table === 'auto') out[name] = 'auto';
    else if (isObj(table)) out[name] = Object.fromEntries(Object.entries(table).filter(([, id]) => typeof id === 'string')) as Record<string, string>;
  }
  return out;
}

/** One entry of `cases:`, with the combinations the schema leaves to code (input xor fixture, an expected outcome). */
function parseCase(c: Obj, index: number, names: Map<string, number>, ctx: Ctx): TestCaseDef {
  const { issues, issueAt, at } = ctx;
  const base: DocPath = ['cases', index];
  const name = typeof c.name === 'string' ? c.name : `case ${index + 1}`;
  const prev = names.get(name);
  if (prev !== undefined)
    issues.push(issueAt('duplicate-name', `two cases are named \`${name}\` (also case ${prev + 1}); names identify cases in reports`, [...base, 'name']));
  else names.set(name, index);

  const hasInput = c.input !== undefined;
  const hasFixture = c.fixture !== undefined;
  if (hasInput === hasFixture) {
    issues.push(
      issueAt(
        'invalid',
        hasInput ? 'give either `input` or `fixture`, not both' : 'missing the rows to test: give `input` (inline rows) or `fixture` (a file)',
        base,
      ),
    );
  }
  if (c.expect === undefined && c.expectSubset === undefined && c.reject === undefined && c.count === undefined) {
    issues.push(
      issueAt(
        'invalid',
        'missing the expected outcome: give `expect` (the exact resource), `expectSubset` (part of it), `count` (how many resources) or `reject`',
        base,
      ),
    );
  }
  if (c.expect !== undefined && c.expectSubset !== undefined) {
    issues.push(issueAt('invalid', 'give either `expect` or `expectSubset`, not both', [...base, 'expectSubset']));
  }

  const def: TestCaseDef = {
    index,
    name,
    resource: typeof c.resource === 'string' ? c.resource : undefined,
    skip: c.skip === true,
    location: at(base),
  };
  if (isObj(c.input)) def.input = [{ data: c.input, line: at([...base, 'input']).line }];
  else if (Array.isArray(c.input)) {
    def.input = [];
    c.input.forEach((row: unknown, j: number) => {
      if (isObj(row)) def.input!.push({ data: row, line: at([...base, 'input', j]).line });
    });
  }
  if (typeof c.fixture === 'string') def.fixture = { path: resolve(ctx.dir, c.fixture), shownPath: c.fixture };
  else if (isObj(c.fixture)) def.fixture = parseFixture(c.fixture, [...base, 'fixture'], ctx);
  if (c.refs !== undefined) def.refs = parseRefs(c.refs);
  if (c.now !== undefined) def.now = parseNow(c.now, [...base, 'now'], ctx);
  if (c.expect !== undefined) def.expect = c.expect;
  if (c.expectSubset !== undefined) def.expectSubset = c.expectSubset;
  if (typeof c.count === 'number') def.count = c.count;
  if (isObj(c.reject) && typeof c.reject.stage === 'string') def.reject = c.reject as unknown as RejectExpectation;
  return def;
}

/** `fixture: { path, rows, where }`: rows are 1-based record numbers (data rows, the header not counted) or `first-last` ranges. */
function parseFixture(f: Obj, path: DocPath, ctx: Ctx): FixtureDef {
  const fx: FixtureDef = {};
  if (typeof f.path === 'string') {
    fx.path = resolve(ctx.dir, f.path);
    fx.shownPath = f.path;
  }
  if (Array.isArray(f.rows)) {
    const rows: RowSelector[] = [];
    f.rows.forEach((r: unknown, j: number) => {
      if (typeof r === 'number' && Number.isInteger(r) && r >= 1) rows.push(r);
      else if (typeof r === 'string' && /^\d+-\d+$/.test(r)) {
        const [a, b] = r.split('-').map(Number) as [number, number];
        if (a > b) ctx.issues.push(ctx.issueAt('invalid', `the range \`${r}\` is empty: write first-last with first ≤ last`, [...path, 'rows', j]));
        else rows.push({ from: a, to: b });
      }
    });
    fx.rows = rows;
  }
  if (typeof f.where === 'string') fx.where = f.where;
  return fx;
}

/** ajv errors → issues at the YAML nodes. The case-level combinations (allOf/oneOf/anyOf/not) are checked in code with clearer messages. */
function schemaIssues(errors: ErrorObject[], loc: YamlLocator): Issue[] {
  const issues: Issue[] = [];
  const seen = new Set<string>();
  for (const e of foldMisspelledKeys(errors)) {
    if (['if', 'oneOf', 'anyOf', 'not', 'allOf'].includes(e.keyword) || /\/(allOf|oneOf|anyOf|not)\//.test(e.schemaPath)) continue;
    const found = schemaIssue(e, loc);
    const refs = refsMessage(e);
    if (refs) found.message = refs;
    const sig = `${found.path}|${found.message}`;
    if (seen.has(sig)) continue;
    seen.add(sig);
    issues.push(found);
  }
  return issues;
}

/** `refs:` stubs deserve messages that say what to write instead. */
function refsMessage(e: ErrorObject): string | undefined {
  const isRefsEntry = /^\/(cases\/\d+\/)?refs\/[^/]+$/.test(e.instancePath);
  if (e.keyword === 'type' && isRefsEntry) {
    const got = e.data === null ? 'empty' : Array.isArray(e.data) ? 'a list' : typeof e.data === 'object' ? 'a mapping' : `a ${typeof e.data}`;
    return `must be \`auto\` or a table of source key → id, not ${got}`;
  }
  if (e.keyword !== 'pattern') return undefined;
  if (isRefsEntry) return `\`${String(e.data)}\` is not allowed: write \`auto\` or a table of source key → id`;
  if (/\/refs\/[^/]+\/[^/]+$/.test(e.instancePath)) return `\`${String(e.data)}\` is not a valid id (letters, digits, \`-\`, \`.\`; at most 64)`;
  return undefined;
}
