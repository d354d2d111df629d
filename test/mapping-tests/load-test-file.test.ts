import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CareEtlError } from '../../src/core/issues.js';
import { loadTestFile } from '../../src/mapping-tests/load-test-file.js';

const dir = mkdtempSync(join(tmpdir(), 'care-etl-test-file-'));
const write = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};
async function problems(text: string) {
  try {
    await loadTestFile(write('t.test.yaml', text));
  } catch (err) {
    expect(err).toBeInstanceOf(CareEtlError);
    return (err as CareEtlError).issues;
  }
  throw new Error('expected problems');
}

describe('loadTestFile', () => {
  it('reads cases, defaults the mapping to mapping.yaml beside the file, parses rows, refs and now', async () => {
    const t = await loadTestFile(
      write(
        'ok.test.yaml',
        [
          'refs: { patient: { "001": p-1 }, doctor: auto }',
          'now: "2026-01-01"',
          'cases:',
          '  - name: a',
          '    input: [{ ID: "001" }, { ID: "002" }]',
          '    expect: []',
          '  - name: b',
          '    fixture: { path: data/x.csv, rows: [1, "3-5"], where: ID = "1" }',
          '    refs: { patient: auto }',
          '    count: 2',
        ].join('\n'),
      ),
    );
    expect(t.mappingFile).toBe(join(dir, 'mapping.yaml'));
    expect(t.refs).toEqual({ patient: { '001': 'p-1' }, doctor: 'auto' });
    expect(t.now?.toISOString()).toBe('2026-01-01T00:00:00.000Z');
    expect(t.cases[0]!.input).toEqual([
      { data: { ID: '001' }, line: 5 },
      { data: { ID: '002' }, line: 5 },
    ]);
    expect(t.cases[1]!.fixture).toEqual({ path: join(dir, 'data/x.csv'), shownPath: 'data/x.csv', rows: [1, { from: 3, to: 5 }], where: 'ID = "1"' });
    expect(t.cases[1]!).toMatchObject({ refs: { patient: 'auto' }, count: 2, location: { line: 7, column: 5 } });
  });

  it('reports every problem with its position', async () => {
    const issues = await problems(
      [
        'mapping: m.yaml',
        'refs: { patient: everything }',
        'cases:',
        '  - name: x',
        '    input: { MRN: 00123 }',
        '    reject: { stage: load }',
        '  - name: x',
        '    expect: {}',
        '    expectSubset: {}',
        '    fixture: { rows: ["5-2"] }',
      ].join('\n'),
    );
    const by = (code: string, text: string) => issues.find((i) => i.code === code && i.message.includes(text));
    expect(by('number-not-text', '`00123`')?.location).toMatchObject({ line: 5, column: 19 });
    expect(by('invalid', 'must be one of source, transform, validate')?.location).toMatchObject({ line: 6 });
    expect(by('invalid', 'write `auto` or a table')?.location).toMatchObject({ line: 2 });
    expect(by('duplicate-name', 'two cases are named `x`')?.location).toMatchObject({ line: 7 });
    expect(by('invalid', 'either `expect` or `expectSubset`')?.location).toMatchObject({ line: 9 });
    expect(by('invalid', 'the range `5-2` is empty')?.location).toMatchObject({ line: 10 });
  });

  it('YAML errors and an unreadable file', async () => {
    expect((await problems('cases: [\n'))[0]).toMatchObject({ code: 'yaml', location: { line: 2 } });
    await expect(loadTestFile(join(dir, 'missing.test.yaml'))).rejects.toThrow(/cannot read/);
  });
});

describe('loadTestFile: the hint', () => {
  async function hintOf(text: string): Promise<string | undefined> {
    const err = await loadTestFile(write('h.test.yaml', text)).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(CareEtlError);
    return (err as CareEtlError).hint;
  }
  it('suggests the editor modeline only to a file that does not have it', async () => {
    const without = await hintOf('cases: 3\n');
    expect(without).toContain('add `# yaml-language-server: $schema=');
    const withIt = await hintOf('# yaml-language-server: $schema=../schemas/mapping-test.schema.json\ncases: 3\n');
    expect(withIt).toContain('schemas/mapping-test.schema.json');
    expect(withIt).not.toContain('yaml-language-server');
  });
});
