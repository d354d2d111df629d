import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CareEtlError, formatIssue } from '../../src/core/issues.js';
import { validateMapping } from '../../src/pipeline/validate-mapping.js';

const DIR = fileURLToPath(new URL('../fixtures/init/todo-mappings/', import.meta.url));

async function failure(file: string): Promise<CareEtlError> {
  try {
    await validateMapping(join(DIR, file));
  } catch (err) {
    expect(err).toBeInstanceOf(CareEtlError);
    return err as CareEtlError;
  }
  throw new Error(`${file}: expected validate to fail`);
}

/** `line:col code path` of each issue, and the text at that position. */
function where(file: string, err: CareEtlError) {
  const lines = readFileSync(join(DIR, file), 'utf8').split('\n');
  return err.issues.map((i) => ({
    at: `${i.location?.line}:${i.location?.column} ${i.code} ${i.path}`,
    text: lines[i.location!.line! - 1]!.slice(i.location!.column! - 1, i.location!.column! + 20),
  }));
}

describe('validate reports every $TODO with its text, in one pass with the other problems', () => {
  it('with a schema error: the schema error and every marker (the type marker instead of "must be one of"), in file order', async () => {
    const err = await failure('schema-and-todos.yaml');
    expect(err.exitCode).toBe(2);
    expect(err.message).toMatch(/schema-and-todos\.yaml: 2 TODO markers and 1 other problem$/);
    expect(where('schema-and-todos.yaml', err)).toEqual([
      { at: '7:12 todo /resources/0/type', text: '$TODO("Patient, Pract' },
      { at: '10:5 invalid /resources/0/onMising', text: 'onMising: end' },
      { at: '12:36 todo /resources/0/map', text: '$TODO("the MRN namesp' },
    ]);
    expect(err.issues.map((i) => i.message)).toEqual([
      'mapping `thing` type: TODO — Patient, Practitioner or CareTeam',
      expect.stringContaining('unknown property `onMising`: did you mean `onMissing`?'),
      'mapping `thing` map: TODO — the MRN namespace',
    ]);
    // what to do with a marker, then the loader's own advice for the other problem
    expect(err.hint).toMatch(/^Each `\$TODO\("…"\)` is a decision `care-etl init` left to you: replace it with .*Fix the listed lines/);
  });

  it('with compile errors: markers replace "`$TODO` is not a function"; a misspelt function is still reported; a groupBy marker once', async () => {
    const err = await failure('compile-and-todos.yaml');
    expect(where('compile-and-todos.yaml', err).map((w) => w.at)).toEqual([
      '13:36 todo /resources/0/map',
      '14:30 function-unknown /resources/0/map',
      '19:15 todo /resources/1/groupBy',
    ]);
    const rendered = err.issues.map(formatIssue);
    expect(rendered[0]).toMatch(/compile-and-todos\.yaml:13:36: error \[todo\] at \/resources\/0\/map: mapping `patient` map: TODO — the MRN namespace$/);
    expect(rendered[1]).toContain('`$upercase` is not a function (did you mean `$uppercase`?)');
    expect(rendered[2]).toContain('mapping `careteam` groupBy: TODO — the column naming the patient');
    expect(rendered.join('\n')).not.toContain('`$TODO` is not a function');
    expect(err.message).toMatch(/: 2 TODO markers and 1 other problem$/);
  });
});
