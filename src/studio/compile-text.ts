/**
 * The editor's mapping text → a compiled mapping, or every problem at its line and column: the loader (YAML,
 * mapping schema, `${VAR}`, lookups), the column contract, the expression compiler and the sources' presence —
 * the checks `care-etl validate` makes, on text not yet saved. Connection variables are the placeholders
 * `care-etl test` uses: nothing here can reach a server, and the API key is never read into what is shown.
 */
import { stat } from 'node:fs/promises';
import { CareEtlError, issue, type Issue } from '../core/issues.js';
import { COLUMN_CONTRACT_HINT, columnContractIssues } from '../mapping/column-contract.js';
import { compileMapping, type CompiledMapping } from '../mapping/compile-mapping.js';
import { closeLookups, loadMapping, type LoadedMapping } from '../mapping/load-mapping.js';
import { TODO_HINT, findTodoMarkers, todoIssue } from '../mapping/todo-markers.js';
import { TEST_CONNECTION_ENV } from '../mapping-tests/run-mapping-tests.js';
import { diagsOf, diagsOfError, sortDiags } from './diagnostics.js';
import { readLookupFile, type LookupFileReader } from '../mapping/lookup-file.js';
import { filesStamp, type SampleCache } from './sample-cache.js';
import type { Diag, ResourceInfo } from './types.js';

export interface CompiledText {
  /** Undefined when the mapping cannot be compiled (`errors` says why). */
  compiled?: CompiledMapping;
  /** Every problem and warning, in file order. */
  errors: Diag[];
  /** The resource mappings the text declares (empty when it cannot be loaded). */
  resources: ResourceInfo[];
  /** The files the result depends on besides the text (sources, lookup files), and their stamp when it was made. */
  files: string[];
  stamp: string;
}

/** Variables for `${VAR}`: the process's, with every connection variable replaced by a placeholder. */
export function offlineEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return { ...env, ...TEST_CONNECTION_ENV };
}

export async function compileText(file: string, text: string, env: NodeJS.ProcessEnv, cache?: SampleCache): Promise<CompiledText> {
  const todos = findTodoMarkers(text, file);
  const todoDiags = diagsOf(todos.map(todoIssue), text, TODO_HINT);
  // The compiler's "`$TODO` is not a function" only restates a marker.
  const notTodo = (d: Diag) => !(d.code === 'function-unknown' && d.message.includes('`$TODO` is not a function'));
  const files: string[] = [];
  const lookupReader: LookupFileReader = (spec, opts) => {
    files.push(spec.path);
    return cache ? cache.lookupFile(spec, opts) : readLookupFile(spec, opts);
  };
  let mapping: LoadedMapping;
  try {
    mapping = await loadMapping(file, { text, env, lookupReader });
  } catch (err) {
    return { errors: sortDiags([...diagsOfError(err, text).filter(notTodo), ...todoDiags]), resources: [], files, stamp: await filesStamp(files) };
  }
  files.push(...Object.values(mapping.sources).map((s) => s.path));
  const stamp = await filesStamp(files);
  const resources = mapping.resources.map((r) => ({ name: r.name, type: r.type, source: r.from }));
  const errors = [...diagsOf(mapping.warnings, text), ...todoDiags];
  errors.push(...diagsOf(await columnContractIssues(mapping, undefined, cache ? (source) => cache.columns(source) : undefined), text, COLUMN_CONTRACT_HINT));
  errors.push(...diagsOf(await missingSources(mapping), text));
  let compiled: CompiledMapping | undefined;
  try {
    compiled = compileMapping(mapping);
  } catch (err) {
    if (!(err instanceof CareEtlError)) throw err;
    closeLookups(mapping.lookups);
    errors.push(...diagsOfError(err, text).filter(notTodo));
  }
  return { compiled, errors: sortDiags(errors), resources, files, stamp };
}

/** A source whose file is not there, at its `path:` (as `validate` says it). */
async function missingSources(mapping: LoadedMapping): Promise<Issue[]> {
  const issues: Issue[] = [];
  for (const [name, src] of Object.entries(mapping.sources)) {
    const ok = await stat(src.path).then(
      (st) => st.isFile(),
      () => false,
    );
    if (!ok)
      issues.push(
        issue.error('source-missing', `source \`${name}\`: file not found: ${src.path}`, {
          path: `/sources/${name}/path`,
          location: mapping.positionOf(['sources', name, 'path']),
        }),
      );
  }
  return issues;
}
