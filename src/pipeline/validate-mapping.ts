import { placeholderId } from '../mapping/placeholder-id.js';
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { CareEtlError, ExitCode, hasCode, issue, type Issue } from '../core/issues.js';
import { compileMapping, type CompiledMapping } from '../mapping/compile-mapping.js';
import { RefError } from '../mapping/errors.js';
import type { EvalContext } from '../mapping/functions.js';
import { closeLookups, loadMapping, type LoadedMapping } from '../mapping/load-mapping.js';
import { notTextHint, notTextReason, openSource, resolveFormat } from '../sources/open-source.js';
import type { SourceConfig, SourceFormat, SourceItem } from '../sources/types.js';
import { transformSource } from '../transform/transform-source.js';
import { validateResource } from '../validate/resource-validator.js';
import { loadReject, type RejectRecord } from '../transform/reject-record.js';
import { matchRuleOf } from '../load/server-index.js';
import { decideIdentity, MatchClaims } from '../load/identity-check.js';
import { toPointer } from '../mapping/yaml-positions.js';
import { readTextFile } from '../core/read-text-file.js';
import { TODO_HINT, findTodoMarkers, todoIssue, type TodoMarker } from '../mapping/todo-markers.js';
import { COLUMN_CONTRACT_HINT, columnContractIssues } from '../mapping/column-contract.js';

const MAX_MATCH_WARNINGS = 20;

export interface SampleResult {
  rows: number;
  /** Rows a run would skip (`where:` false, or a map producing nothing). */
  skipped: number;
  valid: number;
  rejects: Omit<RejectRecord, 'row' | 'raw'>[];
}

export interface ValidateReport {
  mappingFile: string;
  /** Load order derived from the `$ref` calls. */
  order: string[];
  warnings: Issue[];
  /** `--sample N`: per mapping, its first N source rows through transform and validation. */
  samples?: Record<string, SampleResult>;
}

/** The first `n` items; `read.whole` turns true when the source ended before them (every row of it sampled). */
async function* firstN(items: AsyncIterable<SourceItem>, n: number, read: { whole: boolean }): AsyncGenerator<SourceItem> {
  if (n <= 0) return;
  let i = 0;
  for await (const item of items) {
    yield item;
    if (++i >= n) return;
  }
  read.whole = true;
}

/** Loads and compiles the mapping and checks its sources; throws every problem found (and every TODO marker) at once. */
async function checkMapping(mappingFile: string, env: NodeJS.ProcessEnv): Promise<{ mapping: LoadedMapping; compiled: CompiledMapping }> {
  const todos = await todoMarkersOf(mappingFile);
  let mapping: LoadedMapping;
  try {
    mapping = await loadMapping(mappingFile, { env });
  } catch (err) {
    // A schema error (e.g. `type: '$TODO(…)'`) stops the loader before the expressions are compiled: the
    // markers come from the YAML itself, so they are all reported now, not after the schema is fixed.
    if (!(err instanceof CareEtlError) || !todos.length) throw err;
    throw withTodos(err.issues, todos, mappingFile, err.hint);
  }
  try {
    return { mapping, compiled: checkLoaded(mapping, todos, mappingFile, await columnContractIssues(mapping)) };
  } catch (err) {
    closeLookups(mapping.lookups); // the on-disk index of a large lookup file is removed on this path too
    throw err;
  }
}

/** A NUL-filled (or binary) source file, as `checkSource` would refuse it before a run. */
function sourceNotText(src: SourceConfig): Omit<Issue, 'path' | 'location'> | undefined {
  let format: SourceFormat;
  try {
    format = resolveFormat(src);
  } catch {
    return undefined; // compileMapping / the run report a format it cannot tell
  }
  const reason = notTextReason(src, format);
  return reason === undefined ? undefined : issue.error('source-not-text', `${reason}. ${notTextHint(format)}`);
}

/** Compiles the loaded mapping and checks its sources; throws every problem found and every TODO marker. */
function checkLoaded(mapping: LoadedMapping, todos: TodoMarker[], mappingFile: string, contract: Issue[]): CompiledMapping {
  const issues: Issue[] = [];
  let compiled: CompiledMapping | undefined;
  try {
    compiled = compileMapping(mapping);
  } catch (err) {
    if (!(err instanceof CareEtlError)) throw err;
    issues.push(...err.issues);
  }
  for (const [name, src] of Object.entries(mapping.sources)) {
    let ok = false;
    try {
      const st = statSync(src.path);
      ok = st.isFile() || st.isFIFO();
    } catch {
      ok = false;
    }
    if (!ok) {
      issues.push(
        issue.error('source-missing', `source \`${name}\`: file not found: ${src.path}`, {
          path: `/sources/${name}/path`,
          location: mapping.positionOf(['sources', name, 'path']),
        }),
      );
    }
    const notText = ok ? sourceNotText(src) : undefined;
    if (notText)
      issues.push({
        ...notText,
        path: `/sources/${name}/path`,
        message: `source \`${name}\`: ${src.path}: ${notText.message}`,
        location: mapping.positionOf(['sources', name, 'path']),
      });
  }
  issues.push(...sharedFifoIssues(mapping));
  issues.push(...contract);
  let hint = 'Source paths are relative to the mapping file; expressions are JSONata plus the functions in docs/mapping-functions.md.';
  if (contract.length) hint = `${hint} ${COLUMN_CONTRACT_HINT}`;
  if (todos.length) throw withTodos(issues, todos, mappingFile, hint);
  if (issues.length || !compiled) {
    throw new CareEtlError(`mapping file ${mappingFile}: ${issues.length} problem(s)`, { issues, exitCode: ExitCode.config, hint });
  }
  return compiled;
}

/**
 * `care-etl validate`: the file against its schema, every expression compiled, sources present, `$ref` names
 * resolved without cycles. Every problem is collected and thrown at once (CareEtlError, exit 2), each with the
 * file:line:column of the YAML and the position inside the JSONata expression.
 */
export async function validateMapping(file: string, opts: { sample?: number; env?: NodeJS.ProcessEnv } = {}): Promise<ValidateReport> {
  const mappingFile = resolve(file);
  const { mapping, compiled } = await checkMapping(mappingFile, opts.env ?? process.env);
  try {
    return await sampleRows(mapping, compiled, mappingFile, opts.sample);
  } finally {
    closeLookups(mapping.lookups);
  }
}

/** The report; with `sample`, the first rows of each source through transform and validation (offline). */
async function sampleRows(mapping: LoadedMapping, compiled: CompiledMapping, mappingFile: string, sample: number | undefined): Promise<ValidateReport> {
  const report: ValidateReport = { mappingFile, order: compiled.order, warnings: mapping.warnings };
  if (sample !== undefined) {
    report.samples = {};
    /** Per mapping, the keys its sample accepted and rejected, and whether that sample read its whole source. */
    const sampled = new Map<string, { accepted: Set<string>; rejected: Set<string>; read: { whole: boolean }; source: string }>();
    const typeOf = new Map([...compiled.resources.values()].map((r) => [r.def.name, r.def.type]));
    // A sample holds only the first rows of each source, so references resolve to placeholders — unless the
    // referenced row was itself rejected in the sample, or the sample read its whole source without meeting the key:
    // then a run rejects the row too (`ref-missing`), unless an earlier run of the target loaded that key.
    const ctx: EvalContext = {
      now: new Date(),
      resolveRef(name, key) {
        const target = sampled.get(name);
        if (target?.rejected.has(key)) throw new RefError(name, key, `${name} \`${key}\` was rejected in this sample`, 'ref-rejected');
        if (target?.read.whole && !target.accepted.has(key))
          throw new RefError(
            name,
            key,
            `no ${name} with key \`${key}\` in the source \`${target.source}\` (the sample read all of it): a run rejects this row too, unless an earlier run of this target loaded that key`,
            'ref-missing',
          );
        return `${typeOf.get(name)}/${placeholderId(key, 'sample')}`;
      },
      sourceKey: () => undefined,
    };
    for (const name of compiled.order) {
      const res = compiled.resources.get(name)!;
      const result: SampleResult = { rows: 0, skipped: 0, valid: 0, rejects: [] };
      const source = mapping.sources[res.def.from];
      const seen = { accepted: new Set<string>(), rejected: new Set<string>(), read: { whole: false }, source: source.name };
      sampled.set(name, seen);
      const rule = matchRuleOf(res);
      const claims = new MatchClaims();
      const lineOf = new Map<string, number | undefined>();
      let ambiguous = 0;
      for await (const item of transformSource(res, firstN(openSource(source), sample, seen.read), {
        ctx,
        validate: validateResource,
        onRead: () => result.rows++,
        onSkip: (n) => (result.skipped += n),
      })) {
        if (item.ok) {
          // The loader's offline decisions, as the run makes them before any request (src/load/identity-check.ts).
          const identity = await decideIdentity(rule, item.resource);
          if (!identity.ok) {
            seen.rejected.add(item.key);
            result.rejects.push(loadReject(name, item, identity.issues));
            continue;
          }
          result.valid++;
          seen.accepted.add(item.key);
          // Two keys with one match value cannot be told apart on the server once the state is lost.
          const value = identity.matchValue;
          lineOf.set(item.key, item.origin.line);
          const first = claims.claim(value, item.key);
          if (first !== undefined && ambiguous++ < MAX_MATCH_WARNINGS) {
            const at = (k: string, line?: number) => `\`${k}\`${line !== undefined ? ` (${source.name} line ${line})` : ''}`;
            report.warnings.push(
              issue.warning(
                'match-ambiguous',
                `mapping \`${name}\`: keys ${at(first, lineOf.get(first))} and ${at(item.key, item.origin.line)} have the same match value (\`match: ${res.def.match}\`${value.startsWith('content:') ? ', identical content' : ''}): without the state they are told apart on the server by content only (a changed one is rejected until the other is settled); make \`match:\` tell them apart`,
                { path: toPointer(res.def.paths.match), location: res.def.locations.match },
              ),
            );
          }
        } else {
          const { ok: _ok, row: _row, raw: _raw, ...r } = item;
          if (r.key !== undefined && !hasCode(r.issues[0], 'duplicate-key')) seen.rejected.add(r.key);
          result.rejects.push(r);
        }
      }
      if (ambiguous > MAX_MATCH_WARNINGS)
        report.warnings.push(
          issue.warning('match-ambiguous', `mapping \`${name}\`: ${ambiguous - MAX_MATCH_WARNINGS} more pairs of keys with one match value`, {
            location: res.def.locations.match,
          }),
        );
      report.samples[name] = result;
    }
  }
  return report;
}

/** The `$TODO("…")` markers of the file; none when it cannot be read or parsed (the loader says why). */
async function todoMarkersOf(mappingFile: string): Promise<TodoMarker[]> {
  let text: string;
  try {
    text = await readTextFile(mappingFile, mappingFile, 'mapping file');
  } catch {
    return [];
  }
  return findTodoMarkers(text, mappingFile);
}

/**
 * Every problem plus one `todo` issue per marker, in file order. What only restates a marker is dropped: the
 * compiler's "`$TODO` is not a function" for an expression holding markers, and any problem of a value that
 * is nothing but a marker (`type: '$TODO(…)'` is not one of the types — the marker says what to write).
 */
function withTodos(issues: Issue[], todos: TodoMarker[], mappingFile: string, hint: string | undefined): CareEtlError {
  const holding = new Set(todos.map((t) => t.pointer));
  const whole = new Set(todos.filter((t) => t.whole).map((t) => t.pointer));
  const kept = issues.filter((i) => {
    if (i.path === undefined) return true;
    if (whole.has(i.path)) return false;
    return !(hasCode(i, 'function-unknown') && holding.has(i.path) && i.message.includes('`$TODO` is not a function'));
  });
  const all = [...kept, ...todos.map(todoIssue)];
  const pos = (i: Issue) => [i.location?.line ?? Number.MAX_SAFE_INTEGER, i.location?.column ?? 0] as const;
  all.sort((a, b) => pos(a)[0] - pos(b)[0] || pos(a)[1] - pos(b)[1]);
  const others = kept.length;
  const summary = `${todos.length} TODO marker${todos.length === 1 ? '' : 's'}${others ? ` and ${others} other problem${others === 1 ? '' : 's'}` : ''}`;
  return new CareEtlError(`mapping file ${mappingFile}: ${summary}`, {
    issues: all,
    exitCode: ExitCode.config,
    hint: [TODO_HINT, others ? hint : undefined].filter(Boolean).join(' '),
  });
}

// ---------------------------------------------------------------- issue 25 (settings): a FIFO is read once
/**
 * A FIFO (named pipe, `<(zcat export.csv.gz)`) that more than one mapping reads — through one source or several
 * naming the same pipe: the first reader would drain it and the second wait forever for a writer. Refused, at the
 * source's `path`, before anything is read (`validate` and every run mode).
 */
export function sharedFifoIssues(mapping: Pick<LoadedMapping, 'sources' | 'resources' | 'positionOf'>): Issue[] {
  const pipes = new Map<string, { sources: string[]; readers: string[] }>();
  for (const r of mapping.resources) {
    const src = mapping.sources[r.from];
    let id: string | undefined;
    try {
      const st = src ? statSync(src.path) : undefined;
      if (st?.isFIFO()) id = `${st.dev}:${st.ino}`;
    } catch {
      // a missing source is reported on its own
    }
    if (id === undefined) continue;
    const pipe = pipes.get(id) ?? { sources: [], readers: [] };
    pipes.set(id, pipe);
    if (!pipe.sources.includes(r.from)) pipe.sources.push(r.from);
    pipe.readers.push(r.name);
  }
  const issues: Issue[] = [];
  for (const { sources, readers } of pipes.values()) {
    if (readers.length < 2) continue;
    const names = (xs: string[]) => xs.map((x) => `\`${x}\``).join(', ');
    const via = sources.length > 1 ? `sources ${names(sources)} name one FIFO (named pipe)` : `source \`${sources[0]}\` is a FIFO (named pipe)`;
    issues.push(
      issue.error(
        'source-shared-fifo',
        `${via} read by ${readers.length} mappings (${names(readers)}): a pipe can be read only once — write it to a file first, or give each mapping its own pipe`,
        {
          path: `/sources/${sources[0]}/path`,
          location: mapping.positionOf(['sources', sources[0]!, 'path']),
        },
      ),
    );
  }
  return issues;
}
