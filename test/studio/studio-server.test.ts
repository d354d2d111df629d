import { chmodSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { runMappingTests } from '../../src/mapping-tests/run-mapping-tests.js';
import type { StudioServer } from '../../src/studio/server.js';
import type { EvaluateResponse } from '../../src/studio/types.js';
import { copyTree } from '../helpers/cli.js';
import { api, exchange, positionOf, studioOn } from './studio-helpers.js';

let dir: string;
let mappingFile: string;
let s: StudioServer;
let text: string;

beforeAll(async () => {
  dir = copyTree('examples/clinic', 'care-etl-studio-');
  mappingFile = join(dir, 'mapping.yaml');
  text = readFileSync(mappingFile, 'utf8');
  s = await studioOn(mappingFile, { cwd: dir });
});
afterAll(async () => {
  await s.close();
  rmSync(dir, { recursive: true, force: true });
});

const evaluate = async (body: Record<string, unknown>): Promise<EvaluateResponse> => {
  const r = await api(s, 'POST', '/api/evaluate', { text, ...body });
  expect(r.status).toBe(200);
  return r.json() as EvaluateResponse;
};

describe('studio server: who may ask', () => {
  it('refuses /api/* without the token (401) or with another one, and any request naming another host (403)', async () => {
    expect((await exchange(s, 'GET', '/api/mapping')).status).toBe(401);
    const wrong = await exchange(s, 'GET', '/api/mapping', { headers: { authorization: `Bearer ${s.token.slice(1)}x` } });
    expect(wrong.status).toBe(401);
    expect(wrong.json().error).toMatch(/token/);
    const rebound = await exchange(s, 'GET', '/api/mapping', { headers: { authorization: `Bearer ${s.token}`, host: `evil.example:${s.port}` } });
    expect(rebound.status).toBe(403);
    expect((await exchange(s, 'GET', '/', { headers: { host: 'evil.example' } })).status).toBe(403);
    expect((await exchange(s, 'GET', '/api/mapping', { headers: { authorization: `Bearer ${s.token}`, host: `localhost:${s.port}` } })).status).toBe(200);
  });

  it("bound to every interface (--host 0.0.0.0): answers requests addressed by the machine's name, still not another host", async () => {
    const wide = await studioOn(mappingFile, { cwd: dir, host: '0.0.0.0' });
    try {
      const auth = { authorization: `Bearer ${wide.token}` };
      expect((await exchange(wide, 'GET', '/api/mapping', { headers: { ...auth, host: `${hostname()}:${wide.port}` } })).status).toBe(200);
      expect((await exchange(wide, 'GET', '/api/mapping', { headers: { ...auth, host: `evil.example:${wide.port}` } })).status).toBe(403);
    } finally {
      await wide.close();
    }
  });

  it('serves the page without the token, under a strict CSP, never cached; nothing outside assets/', async () => {
    const page = await exchange(s, 'GET', '/');
    expect(page.status).toBe(200);
    expect(page.body).toContain('studio placeholder');
    expect(page.headers['content-security-policy']).toMatch(/default-src 'self'.*script-src 'self'/);
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.headers['cache-control']).toBe('no-store');
    expect((await exchange(s, 'GET', '/assets/studio.js')).headers['content-type']).toMatch(/javascript/);
    for (const path of ['/assets/../index.html', '/assets/%2e%2e/index.html', '/mapping.yaml', '/assets/', '/assets/nope.js']) {
      expect((await exchange(s, 'GET', path)).status, path).toBe(404);
    }
    const bare = await studioOn(mappingFile, { cwd: dir, staticDir: join(dir, 'no-page') });
    try {
      const missing = await exchange(bare, 'GET', '/');
      expect(missing.status).toBe(500);
      expect(missing.json().error).toMatch(/npm run build/);
    } finally {
      await bare.close();
    }
  });

  it('answers bad bodies with 400 and 413, unknown APIs with 404', async () => {
    expect((await api(s, 'POST', '/api/evaluate', 'not json')).status).toBe(400);
    expect((await api(s, 'POST', '/api/evaluate', {})).status).toBe(400);
    expect((await api(s, 'POST', '/api/evaluate', { text: 'x'.repeat(5 * 1024 * 1024 + 10) })).status).toBe(413);
    expect((await api(s, 'GET', '/api/nope')).status).toBe(404);
  });
});

describe('studio server: evaluation on examples/clinic', () => {
  it('GET /api/mapping: the text, its hash, the test file', async () => {
    const m = (await api(s, 'GET', '/api/mapping')).json();
    expect(m).toMatchObject({ path: mappingFile, text, testFile: 'mapping.test.yaml', sampleSize: 1000 });
    expect(m.hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('totals, a page, a search by key and a jump to a line', async () => {
    const r = await evaluate({ resource: 'patient', offset: 10, limit: 5 });
    expect(r.errors).toEqual([]);
    expect(r.resources.map((x) => [x.name, x.type, x.source])).toEqual([
      ['patient', 'Patient', 'patients'],
      ['practitioner', 'Practitioner', 'clinicians'],
      ['careteam', 'CareTeam', 'assignments'],
    ]);
    expect(r.totals).toEqual({ sampled: 35, loaded: 30, rejected: 5, skipped: 0 });
    expect(r.page).toEqual({ offset: 10, limit: 5, total: 35 });
    expect(r.rows.map((x) => x.index)).toEqual([10, 11, 12, 13, 14]);
    const first = (await evaluate({ resource: 'patient', limit: 1 })).rows[0]!;
    expect(first).toMatchObject({ index: 0, line: 2, key: '000001', status: 'loaded', input: { MRN: '000001', LAST: 'Yilmaz' } });
    expect(first.resource).toMatchObject({ resourceType: 'Patient', name: [{ family: 'Yilmaz' }], birthDate: '1989-01-03' });
    const rejected = (await evaluate({ resource: 'patient', limit: 100 })).rows.filter((x) => x.status === 'rejected');
    expect(rejected).toHaveLength(5);
    for (const x of rejected) expect(x.reason).toMatch(/^(transform|source): /);
    expect(rejected.find((x) => x.key === '000031')?.reason).toMatch(/not a valid date in format `MM\/DD\/YYYY`/);
    const invalid = text.replace('"active": true', '"active": "yes"');
    const v = (await api(s, 'POST', '/api/evaluate', { text: invalid, resource: 'patient', limit: 1 })).json() as EvaluateResponse;
    expect(v.rows[0]).toMatchObject({ status: 'rejected', resource: { active: 'yes' } }); // the resource validation refused, with its issues
    expect(v.rows[0]!.issues[0]).toMatchObject({ path: '/active' });
    expect(v.rows[0]!.reason).toMatch(/^validate: /);

    const found = await evaluate({ resource: 'patient', search: '000017' });
    expect(found.rows.map((x) => x.key)).toEqual(['000017']);
    expect(found.page.total).toBe(1);
    const byCell = (await evaluate({ resource: 'patient', search: 'okafor' })).rows; // no key holds it: the cells do
    expect(byCell.map((x) => x.key)).toContain('000017');
    for (const x of byCell) expect(String(x.input.LAST).toLowerCase()).toBe('okafor');
    const jump = await evaluate({ resource: 'patient', line: 20, limit: 3 });
    expect(jump.rows[0]!.line).toBeGreaterThanOrEqual(20);
    expect(jump.page.offset).toBe(jump.rows[0]!.index);
  });

  it('the $refs a row resolves, stubbed as care-etl test stubs `auto`, at their place in the resource', async () => {
    const r = await evaluate({ resource: 'careteam', limit: 1 });
    expect(r.resource).toBe('careteam');
    expect(r.rows[0]!.refs).toEqual([
      { path: '/subject/reference', target: 'patient', key: '000001', resolvesTo: 'Patient/000001' },
      { path: '/participant/0/member/reference', target: 'practitioner', key: '1245319599', resolvesTo: 'Practitioner/1245319599' },
    ]);
  });

  it('a column typo is an error at its line:col naming the column and the closest one; rows still shown', async () => {
    const typo = text.replace('$name(LAST)', '$name(LSAT)');
    const r = (await api(s, 'POST', '/api/evaluate', { text: typo, resource: 'patient', limit: 1 })).json() as EvaluateResponse;
    const at = positionOf(typo, 'LSAT');
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).toMatchObject({ severity: 'error', code: 'column-missing', line: at.line, column: at.column, endColumn: at.column + 4 });
    expect(r.errors[0]!.message).toMatch(/reads `LSAT`.*did you mean `LAST`/);
    expect(r.rows[0]!.resource).toMatchObject({ name: [{ given: ['Sofia'] }] });
  });

  it('a JSONata syntax error: at its line, no rows, zero totals; `where:` false rows are skipped with the reason', async () => {
    const broken = text.replace('$name(LAST)', '$name(LAST');
    const r = (await api(s, 'POST', '/api/evaluate', { text: broken })).json() as EvaluateResponse;
    expect(r.errors[0]).toMatchObject({ code: 'jsonata-syntax', line: positionOf(broken, '$name(LAST').line });
    expect(r.rows).toEqual([]);
    expect(r.totals).toEqual({ sampled: 0, loaded: 0, rejected: 0, skipped: 0 });

    const where = text.replace('    key: MRN\n', '    key: MRN\n    where: SEX != "M"\n');
    const w = (await api(s, 'POST', '/api/evaluate', { text: where, resource: 'patient', limit: 100 })).json() as EvaluateResponse;
    expect(w.errors).toEqual([]);
    const skipped = w.rows.filter((x) => x.status === 'skipped');
    expect(skipped.length).toBe(w.totals.skipped);
    expect(skipped.length).toBeGreaterThan(0);
    expect(skipped[0]!.reason).toMatch(/where: SEX != "M"/);
    expect(skipped[0]!.key).toMatch(/^0000/);
  });

  it('reads a source or lookup file again once it changed on disk', async () => {
    writeFileSync(join(dir, 'data', 'sex.csv'), 'CODE,LABEL\nM,male\nF,female\nU,unknown\n');
    const withFile = text.replace('gender: { M: male, F: female, U: unknown }', 'gender: { path: data/sex.csv, key: CODE, value: LABEL }');
    const gender = async () => ((await api(s, 'POST', '/api/evaluate', { text: withFile, resource: 'patient', limit: 1 })).json() as EvaluateResponse).rows[0]!;
    expect((await gender()).resource).toMatchObject({ gender: 'female' });
    writeFileSync(join(dir, 'data', 'sex.csv'), 'CODE,LABEL\nM,male\nF,other\nU,unknown\n');
    expect((await gender()).resource).toMatchObject({ gender: 'other' });
    const csv = join(dir, 'data', 'patients.csv');
    const before = readFileSync(csv, 'utf8');
    writeFileSync(csv, before.replace('000001,Sofia,Yilmaz', '000001,Sofia,Yilmaz-Berg'));
    expect((await gender()).input.LAST).toBe('Yilmaz-Berg');
    writeFileSync(csv, before);
    rmSync(join(dir, 'data', 'sex.csv'));
  });

  it('save: the text byte for byte, the mode kept; a file changed on disk since → 409 and left alone', async () => {
    chmodSync(mappingFile, 0o640);
    const m = (await api(s, 'GET', '/api/mapping')).json();
    const edited = `# edited in the studio\n${m.text}`.replace('key: MRN', 'key: MRN   # the chart number');
    const saved = await api(s, 'POST', '/api/save', { text: edited, baseHash: m.hash });
    expect(saved.status).toBe(200);
    expect(readFileSync(mappingFile, 'utf8')).toBe(edited);
    expect(statSync(mappingFile).mode & 0o777).toBe(0o640);
    const again = (await api(s, 'GET', '/api/mapping')).json();
    expect(saved.json()).toEqual({ saved: true, hash: again.hash });

    writeFileSync(mappingFile, `${edited}\n# someone else\n`);
    const stale = await api(s, 'POST', '/api/save', { text: edited, baseHash: again.hash });
    expect(stale.status).toBe(409);
    expect(stale.json().hash).not.toBe(again.hash);
    expect(readFileSync(mappingFile, 'utf8')).toMatch(/# someone else\n$/);
    writeFileSync(mappingFile, text);
  });
});

describe('studio server: add as test case', () => {
  it('appends loaded, rejected and grouped rows as cases, keeping the file byte for byte; care-etl test passes them', async () => {
    const testFile = join(dir, 'mapping.test.yaml');
    const before = readFileSync(testFile, 'utf8');
    const patients = await evaluate({ resource: 'patient', limit: 100 });
    const rejected = patients.rows.find((x) => x.key === '000031')!; // a date the map refuses
    const added = [];
    for (const [resource, index] of [
      ['patient', 0],
      ['patient', 0],
      ['patient', rejected.index],
      ['careteam', 1],
    ] as const) {
      const r = await api(s, 'POST', '/api/test-case', { text, resource, index });
      expect(r.status, r.body).toBe(200);
      added.push(r.json());
    }
    expect(added).toEqual([
      { file: 'mapping.test.yaml', name: 'patient line 2' },
      { file: 'mapping.test.yaml', name: 'patient line 2 #2' },
      { file: 'mapping.test.yaml', name: `patient line ${rejected.line}` },
      { file: 'mapping.test.yaml', name: 'careteam line 3' },
    ]);
    const after = readFileSync(testFile, 'utf8');
    expect(after.startsWith(before.replace(/\n*$/, '\n'))).toBe(true); // comments, alignment, flow style: all kept
    expect(statSync(testFile).mode & 0o777).toBe(0o600);
    // Read as YAML 1.1 (PyYAML, Ruby, SnakeYAML): the added cells are the same strings, not dates, booleans or sexagesimals.
    const cases = (text11: string, version: '1.1' | '1.2') => (parse(text11, { version }) as { cases: unknown[] }).cases.slice(-added.length);
    expect(JSON.stringify(cases(after, '1.1'))).toBe(JSON.stringify(cases(after, '1.2')));
    expect(after).toMatch(/: "\d{4}-\d{2}-\d{2}"/); // a date cell, quoted

    const report = await runMappingTests([testFile]);
    const byName = new Map(report.files[0]!.cases.map((c) => [c.name, c]));
    for (const { name } of added) expect(byName.get(name)?.status, name).toBe('passed');
    expect(report.totals.failed + report.totals.errors).toBe(0);
  });

  it('creates the test file when there is none (mode 0600), and refuses a row that cannot be a case', async () => {
    rmSync(join(dir, 'mapping.test.yaml'));
    const r = await api(s, 'POST', '/api/test-case', { text, resource: 'practitioner', index: 0 });
    expect(r.json()).toEqual({ file: 'mapping.test.yaml', name: 'practitioner line 1' });
    const created = readFileSync(join(dir, 'mapping.test.yaml'), 'utf8');
    expect(created).toMatch(/^# Test cases of mapping.yaml/);
    expect((await runMappingTests([join(dir, 'mapping.yaml')])).totals).toMatchObject({ cases: 1, passed: 1 });
    expect((await api(s, 'POST', '/api/test-case', { text, resource: 'patient', index: 9999 })).status).toBe(422);
    expect((await api(s, 'POST', '/api/test-case', { text: text.replace('$name(LAST)', '$name(LAST'), resource: 'patient', index: 0 })).status).toBe(422);
  });
});
