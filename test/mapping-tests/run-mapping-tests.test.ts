import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { formatFile, formatSummary } from '../../src/mapping-tests/format-report.js';
import { findTestFiles, runMappingTests, runTestFile, stubContext } from '../../src/mapping-tests/run-mapping-tests.js';
import { RefError } from '../../src/mapping/errors.js';

const DIR = fileURLToPath(new URL('../fixtures/mapping-tests/', import.meta.url));
const f = (name: string) => `${DIR}${name}`;

/** 1-based line/column of the n-th occurrence of `needle` in a fixture file. */
function positionIn(name: string, needle: string): { line: number; column: number } {
  const text = readFileSync(f(name), 'utf8');
  const at = text.indexOf(needle);
  if (at < 0) throw new Error(`${needle} not in ${name}`);
  const before = text.slice(0, at);
  return { line: before.split('\n').length, column: at - before.lastIndexOf('\n') };
}

describe('runTestFile', () => {
  it('passes exact, subset, rejection and grouped cases (stubbed refs, $sourceKey, fixed now); lists skipped ones', async () => {
    const r = await runTestFile(f('passing.test.yaml'));
    expect(r.error).toBeUndefined();
    expect(r.mappingFile).toBe(f('mapping.yaml'));
    expect(r.cases.map((c) => [c.name, c.resource, c.status])).toEqual([
      ['exact resource from an inline row', 'patient', 'passed'],
      ['subset from a fixture row', 'patient', 'passed'],
      ['expected rejection', 'patient', 'passed'],
      ['group with stubs, sourceKey and a fixed now', 'team', 'passed'],
      ['skipped case', 'patient', 'skipped'],
    ]);
    for (const c of r.cases) expect(c.failures).toEqual([]);
    expect(r.cases[0]!.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('a failing case reports a structural diff (path, expected, got) and where the map is', async () => {
    const r = await runTestFile(f('failing.test.yaml'));
    const c = r.cases.find((x) => x.name === 'wrong expectation')!;
    expect(c.status).toBe('failed');
    expect(c.location).toMatchObject(positionIn('failing.test.yaml', 'name: wrong expectation'));
    expect(c.failures).toHaveLength(1);
    expect(c.failures[0]!.message).toContain('differs from the expected one');
    const map = positionIn('mapping.yaml', 'map: |');
    expect(c.failures[0]!.message).toContain(`mapping-tests/mapping.yaml:${map.line}:${map.column + 5})`);
    expect(c.failures[0]!.diff).toEqual([
      { path: '/name/0/family', kind: 'changed', expected: 'LEE', got: 'Lee' },
      { path: '/name/0/given/1', kind: 'missing', expected: 'marie' },
      { path: '/active', kind: 'missing', expected: true },
      { path: '/gender', kind: 'unexpected', got: 'female' },
    ]);
    const text = formatFile(r, { cwd: DIR }).join('\n');
    expect(text).toContain('✗ patient › wrong expectation');
    expect(text).toContain('/name/0/family: expected "LEE", got "Lee"');
    expect(text).toContain('/name/0/given/1: missing — expected "marie"');
    expect(text).toContain('/gender: unexpected — got "female"');
    expect(c.produced?.resources).toHaveLength(1);
  });

  it('a broken expression is reported with its file:line:column in the mapping', async () => {
    const r = await runTestFile(f('failing.test.yaml'));
    const c = r.cases.find((x) => x.name === 'broken expression at run time')!;
    expect(c.status).toBe('failed');
    const issue = c.failures.flatMap((x) => x.issues ?? [])[0]!;
    expect(issue.code).toBe('jsonata');
    expect(issue.message).toContain('Unable to cast value to a number');
    expect(issue.message).not.toContain('heavy'); // JSONata quotes the cell's value: masked (patient data)
    expect(issue.location).toMatchObject(positionIn('mapping.yaml', '$number(WEIGHT)'));
    expect(issue.location?.file).toMatch(/mapping-tests\/mapping\.yaml$/);
    const { line, column } = positionIn('mapping.yaml', '$number(WEIGHT)');
    expect(formatFile(r, { cwd: DIR }).join('\n')).toContain(`mapping.yaml:${line}:${column}: error [jsonata]`);
    expect(c.failures.map((x) => x.message)).toContain('expected 1 resource, got 0 resources');
  });

  it('an unstubbed $ref fails like a run (ref-missing) and says how to stub it', async () => {
    const r = await runTestFile(f('failing.test.yaml'));
    const c = r.cases.find((x) => x.name === 'reference not stubbed')!;
    expect(c.failures[0]!.message).toContain('add its key under `refs:`');
    expect(c.failures[0]!.issues![0]).toMatchObject({
      code: 'ref-missing',
      location: expect.objectContaining(positionIn('mapping.yaml', '$ref("patient", $[0].ID) }')),
    });
  });

  it('a rejection that does not match the expected one fails with the actual issues', async () => {
    const r = await runTestFile(f('failing.test.yaml'));
    const c = r.cases.find((x) => x.name === 'wrong rejection expected')!;
    expect(c.status).toBe('failed');
    expect(c.failures[0]!.message).toBe('the rejection does not match (expected stage transform, code date-invalid)');
    expect(c.failures[0]!.issues![0]!.code).toBe('lookup-miss');
  });

  it('a broken test file is reported with positions, nothing runs', async () => {
    const r = await runTestFile(f('broken/bad-file.test.yaml'));
    expect(r.cases).toEqual([]);
    const issues = r.error!.issues;
    expect(issues.map((i) => i.code).sort()).toEqual(['invalid', 'invalid', 'invalid', 'number-not-text']);
    expect(issues.find((i) => i.code === 'number-not-text')).toMatchObject({
      location: expect.objectContaining(positionIn('broken/bad-file.test.yaml', '000001')),
    });
    expect(issues.find((i) => i.message.includes('expectt'))?.message).toContain('did you mean `expect`?');
  });

  it('a broken mapping is reported with the position of the syntax error', async () => {
    const r = await runTestFile(f('broken/mapping.test.yaml'));
    expect(r.error?.issues[0]).toMatchObject({ code: 'jsonata-syntax', location: expect.objectContaining({ line: 13 }) });
  });
});

describe('runMappingTests', () => {
  it('finds *.test.yaml recursively, in order', async () => {
    const { files, missing } = await findTestFiles([DIR, 'no-such-dir'], DIR);
    expect(files.map((p) => p.slice(DIR.length))).toEqual(['broken/bad-file.test.yaml', 'broken/mapping.test.yaml', 'failing.test.yaml', 'passing.test.yaml']);
    expect(missing).toEqual(['no-such-dir']);
  });

  it('exit code 0 when all pass, 1 with a failed case, 2 with a broken file, 2 with no test file', async () => {
    expect((await runMappingTests([f('passing.test.yaml')])).exitCode).toBe(0);
    const failing = await runMappingTests([f('passing.test.yaml'), f('failing.test.yaml')]);
    expect(failing.exitCode).toBe(1);
    expect(failing.totals).toMatchObject({ files: 2, brokenFiles: 0, cases: 9, passed: 4, failed: 4, skipped: 1 });
    expect(formatSummary(failing)).toMatch(/^9 cases · 2 files · .*\ncases: 4 passed, 4 failed, 1 skipped$/);
    expect((await runMappingTests([DIR])).exitCode).toBe(2);
    expect((await runMappingTests([`${DIR}people.csv`.replace('people.csv', 'broken/')])).exitCode).toBe(2);
    const none = await runMappingTests([fileURLToPath(new URL('../../src/core/', import.meta.url))]);
    expect(none.exitCode).toBe(2);
    expect(formatSummary(none)).toBe('No mapping test files (*.test.yaml) found.');
  });

  it('a mapping file given instead of a test file runs the test files beside it that test it', async () => {
    const { files, forMapping } = await findTestFiles([f('mapping.yaml')]);
    expect(files).toEqual([f('failing.test.yaml'), f('passing.test.yaml')]);
    expect([...forMapping.get(f('passing.test.yaml'))!]).toEqual([f('mapping.yaml')]);
    const r = await runMappingTests([f('mapping.yaml')]);
    expect(r.files.map((x) => x.file)).toEqual([f('failing.test.yaml'), f('passing.test.yaml')]);
    expect(r.totals.cases).toBe(9);
    // another mapping in the same folder: its test files only
    const other = await runMappingTests([f('broken/mapping.yaml')]);
    expect(other.files.map((x) => x.file.slice(DIR.length))).toEqual(['broken/bad-file.test.yaml', 'broken/mapping.test.yaml']);
  });

  it('--grep runs only the matching cases', async () => {
    const r = await runMappingTests([f('passing.test.yaml')], { grep: 'subset' });
    expect(r.files[0]!.cases.map((c) => c.name)).toEqual(['subset from a fixture row']);
  });
});

describe('stubContext', () => {
  it("resolves stubbed keys and `auto`, throws the run's RefError otherwise, and inverts stubs for $sourceKey", () => {
    const types: Record<string, string> = { patient: 'Patient', doctor: 'Practitioner' };
    const ctx = stubContext({ patient: { '001': 'p-1' }, doctor: 'auto' }, (n) => types[n], new Date(0));
    expect(ctx.resolveRef('patient', '001')).toBe('Patient/p-1');
    expect(ctx.resolveRef('doctor', 'Dr Who/1')).toBe('Practitioner/Dr-Who-1');
    let err: unknown;
    try {
      ctx.resolveRef('patient', '002');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RefError);
    expect(err).toMatchObject({ code: 'ref-missing', message: 'no patient with key `002` has been loaded (not in its source, or not yet loaded)' });
    expect(ctx.sourceKey!('Patient/p-1')).toBe('001');
    expect(ctx.sourceKey!('Patient/p-9')).toBeUndefined();
  });
});

describe('a fixture `where` with a pattern the linear-time regex engine cannot run', () => {
  it('is an error of that case naming the pattern, not a crash or a silent non-match', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-where-regex-'));
    try {
      for (const name of ['mapping.yaml', 'people.csv', 'links.csv']) copyFileSync(f(name), join(dir, name));
      const test = [
        'cases:',
        '  - name: lookahead in where',
        '    resource: team',
        "    fixture: { where: '$contains(ID, /0(?=1)/)' }",
        '    expect: {}',
        '',
      ].join('\n');
      writeFileSync(join(dir, 'where.test.yaml'), test);
      const r = await runTestFile(join(dir, 'where.test.yaml'));
      const text = formatFile(r, { cwd: dir }).join('\n');
      expect(text).toContain('[regex-unsupported]');
      expect(text).toContain('fixture `where`: the regular expression /0(?=1)/ uses a lookahead');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
