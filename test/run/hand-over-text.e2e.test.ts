import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { copyTree, runCliInProcess } from '../helpers/cli.js';

/*
 * Issue 22, item 6, end to end (built CLI, over HTTP to the sandbox): no cell value in what is handed over. A
 * mapping's own `$error` / `$assert` text built from cells, a `$number(cell)` failure and a property named by a cell
 * reach rejects.ndjson (0600) in full, and none of rejects.summary.csv, the HTML and Markdown reports, stdout or
 * stderr — those name the code and the expression's file:line:col instead.
 */

const API_KEY = 'hand-over-e2e-key';
const TENANT = 't-hand-over';
let sb: Sandbox;
let env: Record<string, string>;

beforeAll(async () => {
  sb = await startSandbox({ port: 0, apiKey: API_KEY, emrId: 'emr-ho', tenants: [TENANT] });
  env = { CARE_BASE_URL: sb.url, CARE_API_KEY: API_KEY, CARE_EMR_ID: 'emr-ho', CARE_TENANT_ID: TENANT, NO_COLOR: '1' };
});
afterAll(async () => {
  await sb.close();
});

/** patients.csv: 000002 Liam Moreau, 000003 Ethan Lindqvist, 000004 Tomas Nakamura, 000006 Ravi Kowalski. */
const CELLS = ['Moreau', 'Lindqvist', 'Tomas', 'Kowalski'];

function clinicWithCellMessages(): { dir: string; mapping: string; errorLine: number } {
  const dir = copyTree('examples/clinic', 'care-etl-hand-over-');
  const mapping = join(dir, 'mapping.yaml');
  const original = readFileSync(mapping, 'utf8');
  const active = `"active": MRN = "000002" ? $error("bad " & LAST) : (MRN = "000003" ? $number(LAST) > 0 : (MRN = "000004" ? ($assert(false, "no " & FIRST); true) : true)),`;
  let text = original.replace('"active": true,', active);
  // a property named by a cell: `{ (LAST): … }` is a computed key
  text = text.replace('"given": [$name(FIRST)] }]', '"given": [$name(FIRST)], (MRN = "000006" ? LAST : "prefix"): ["x"] }]');
  expect(text).not.toBe(original);
  writeFileSync(mapping, text);
  const errorLine = text.split('\n').findIndex((l) => l.includes('$error(')) + 1;
  return { dir, mapping, errorLine };
}

describe('a mapping message built from cells stays in rejects.ndjson', () => {
  it('$error, $assert, $number(cell), a cell-named property: named by code and position everywhere else', async () => {
    const { dir, mapping, errorLine } = clinicWithCellMessages();
    const html = join(dir, 'report.html');
    const md = join(dir, 'report.md');
    const first = await runCliInProcess(['run', mapping, '--progress', 'lines', '--report', html], { env });
    expect(first.code, first.stderr).toBe(1);
    // The same rows again (rejected rows are retried), over HTTP, for the Markdown report.
    const second = await runCliInProcess(['run', mapping, '--progress', 'lines', '--report', md], { env });
    expect(second.code, second.stderr).toBe(1);

    const rejects = readFileSync(join(dir, '.care-etl', 'rejects.ndjson'), 'utf8');
    expect(rejects).toContain('bad Moreau');
    expect(rejects).toContain('no Tomas');
    const summary = readFileSync(join(dir, '.care-etl', 'rejects.summary.csv'), 'utf8');
    const handedOver = {
      summary,
      html: readFileSync(html, 'utf8'),
      md: readFileSync(md, 'utf8'),
      stdout: first.stdout + second.stdout,
      stderr: first.stderr + second.stderr,
    };
    for (const [name, text] of Object.entries(handedOver)) for (const cell of CELLS) expect(text, `${cell} in ${name}`).not.toContain(cell);

    const row = (key: string) => summary.split('\r\n').find((l) => l.includes(`,${key},`)) ?? '';
    expect(row('000002')).toContain(`the mapping's $error at mapping.yaml:${errorLine}:`);
    expect(row('000002')).toContain('column LAST: '); // issue 26: the column the failing call reads
    expect(row('000002')).toContain('(message in rejects.ndjson),"mapping `patient` map, [D3137], at mapping.yaml:');
    expect(row('000004')).toContain("the mapping's $assert at mapping.yaml:");
    expect(row('000003')).toContain('column LAST: unable to cast a value to a number,"mapping `patient` map, [D3030]');
    expect(row('000006')).toContain('a property the schema does not allow');
    // the terminal line names the same
    expect(first.stderr).toContain(`the mapping's $error at mapping.yaml:${errorLine}:`);
  }, 120_000);
});
