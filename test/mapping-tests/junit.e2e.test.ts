import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, runCliInProcess } from '../helpers/cli.js';

/**
 * The XML is read back by a parser this project did not write: Python's xml.etree (expat), strict — an unescaped
 * `<` or `&`, or a control character, is a parse error. It prints what it read as JSON.
 */
function readJunit(xml: string): {
  root: Record<string, string>;
  suites: { attrs: Record<string, string>; cases: { attrs: Record<string, string>; kind?: string; message?: string; text?: string }[] }[];
} {
  const py = `
import sys, json, xml.etree.ElementTree as ET
root = ET.fromstring(sys.stdin.buffer.read())
def case(c):
    kids = [k for k in c]
    k = kids[0] if kids else None
    return {"attrs": c.attrib, "kind": k.tag if k is not None else None, "message": k.get("message") if k is not None else None, "text": k.text if k is not None else None}
print(json.dumps({"root": dict(root.attrib, tag=root.tag), "suites": [{"attrs": s.attrib, "cases": [case(c) for c in s.findall("testcase")]} for s in root.findall("testsuite")]}))
`;
  return JSON.parse(execFileSync('python3', ['-c', py], { input: xml }).toString());
}

describe('care-etl test --reporter junit', () => {
  it('failing, erroring, skipped and broken files as JUnit XML a strict parser reads, names with <&"\' and control characters escaped', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'care-etl-junit-'));
    cpSync(join(ROOT, 'test/fixtures/mapping-tests'), dir, { recursive: true });
    // A case whose name needs escaping (and holds a character XML 1.0 forbids), and fails.
    writeFileSync(
      join(dir, 'odd-names.test.yaml'),
      `mapping: mapping.yaml\ncases:\n  - name: "a <b> & \\"c\\" 'd' \\x01 end"\n    resource: patient\n    input: { ID: "001", FIRST: ann, LAST: LEE, SEX: F, DOB: "1990-01-02", WEIGHT: "" }\n    expectSubset: { gender: "<male & more>" }\n`,
    );
    const out = join(dir, 'junit.xml');
    const r = await runCliInProcess(['test', dir, '--reporter', 'junit', '--out', out]);
    expect(r.code, r.stderr).toBe(2); // the broken/ folder
    expect(r.stdout).toContain('cases:'); // the case list stays on stdout
    expect(statSync(out).mode & 0o777).toBe(0o600);
    const xml = readFileSync(out, 'utf8');
    const doc = readJunit(xml);
    expect(doc.root.tag).toBe('testsuites');
    const byFile = Object.fromEntries(doc.suites.map((s) => [s.attrs.name!.replace(/^.*\//, ''), s]));
    const odd = byFile['odd-names.test.yaml']!;
    expect(odd.cases[0]!.attrs.name).toBe(`patient › a <b> & "c" 'd'  end`);
    expect(odd.cases[0]!.kind).toBe('failure');
    expect(odd.cases[0]!.text).toContain('<male & more>');
    const failing = byFile['failing.test.yaml']!;
    expect(Number(failing.attrs.tests)).toBe(failing.cases.length);
    expect(Number(failing.attrs.failures) + Number(failing.attrs.errors)).toBeGreaterThan(0);
    expect(failing.cases.find((c) => c.attrs.name === 'patient › wrong expectation')!.text).toContain('/name/0/family');
    const passing = byFile['passing.test.yaml']!;
    expect(passing.cases.filter((c) => c.kind === 'skipped')).toHaveLength(1);
    expect(passing.attrs.failures).toBe('0');
    const broken = byFile['bad-file.test.yaml']!;
    expect(broken.cases[0]!.kind).toBe('error');
    expect(broken.cases[0]!.text).toContain('number-not-text');
    // The root's counts are the suites' sums.
    const sum = (k: string) => doc.suites.reduce((n, s) => n + Number(s.attrs[k]), 0);
    for (const k of ['tests', 'failures', 'errors', 'skipped']) expect(Number(doc.root[k]), k).toBe(sum(k));
  });

  it('without --out: the XML alone on stdout, the summary on stderr', async () => {
    const r = await runCliInProcess(['test', 'test/fixtures/mapping-tests/passing.test.yaml', '--reporter', 'junit']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.startsWith('<?xml')).toBe(true);
    expect(r.stderr).toContain('cases: 4 passed, 0 failed, 1 skipped');
    const doc = readJunit(r.stdout);
    expect([doc.root.tests, doc.root.failures, doc.root.skipped]).toEqual(['5', '0', '1']);
  });

  it('--json with the XML on stdout is refused (exit 2); with --out both are written', async () => {
    const r = await runCliInProcess(['test', 'test/fixtures/mapping-tests/passing.test.yaml', '--reporter', 'junit', '--json']);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout).error.message).toContain('--json=true cannot also be provided when using --reporter');
    const out = join(mkdtempSync(join(tmpdir(), 'care-etl-junit-')), 'junit.xml');
    const both = await runCliInProcess(['test', 'test/fixtures/mapping-tests/passing.test.yaml', '--reporter', 'junit', '--json', '--out', out]);
    expect(both.code, both.stderr).toBe(0);
    expect(JSON.parse(both.stdout).totals.passed).toBe(4);
    expect(readJunit(readFileSync(out, 'utf8')).root.tests).toBe('5');
  });
});
