// Regular expressions in mappings run on the linear-time engine: a pattern it cannot run (lookaround,
// backreference) is a mapping error at the literal's file:line:col with the fix, found when the mapping is
// compiled (`validate`, and the start of `run` / `plan`) — in maps, keys and lookup-file expressions alike.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ExitCode } from '../../src/core/issues.js';
import { compileMapping } from '../../src/mapping/compile-mapping.js';
import { loadMapping } from '../../src/mapping/load-mapping.js';
import { regexProblems, regexStart } from '../../src/mapping/regex-check.js';
import jsonata from 'jsonata';
import { issuesOf, issueWith } from './helpers.js';

const DIR = fileURLToPath(new URL('../fixtures/regex/', import.meta.url));

function positionOf(name: string, needle: string): { line: number; column: number } {
  const text = readFileSync(`${DIR}${name}`, 'utf8');
  const at = text.indexOf(needle);
  if (at < 0) throw new Error(`${needle} not in ${name}`);
  const before = text.slice(0, at);
  return { line: before.split('\n').length, column: at - before.lastIndexOf('\n') };
}

describe('patterns the linear-time engine cannot run', () => {
  it('are mapping errors (exit 2) at the literal, naming what and the fix: map and key', async () => {
    const file = `${DIR}unsupported.yaml`;
    const { error, issues } = await issuesOf(async () => compileMapping(await loadMapping(file, { env: {} })));
    expect(error.exitCode).toBe(ExitCode.config);

    const look = issueWith(issues, 'regex-unsupported', 'lookbehind');
    expect(look.message).toMatch(
      /^mapping `patient` map: the regular expression \/\(\?<!\^\)a\/ uses a lookbehind `\(\?<!…\)`, which the linear-time regex engine \(RE2\) cannot run; match the surrounding text/,
    );
    expect(look.location).toMatchObject({ file, ...positionOf('unsupported.yaml', '/(?<!^)a/i') });
    expect(look.path).toBe('/resources/0/map');

    const back = issueWith(issues, 'regex-unsupported', 'backreference');
    expect(back.message).toContain('mapping `patient` key: the regular expression /(0)\\1(\\d+)/ uses a backreference `\\1`');
    expect(back.message).toContain('capture the parts separately');
    expect(back.location).toMatchObject({ file, ...positionOf('unsupported.yaml', '/(0)\\1') });
  });

  it("in a lookup file's key expression: reported when the mapping is loaded, at the literal", async () => {
    const file = `${DIR}unsupported-lookup.yaml`;
    // lookup tables are read (and their expressions checked) by loadMapping, before compileMapping
    const { error, issues } = await issuesOf(() => loadMapping(file, { env: {} }));
    expect(error.exitCode).toBe(ExitCode.config);
    const ahead = issues.find((i) => i.code === 'regex-unsupported' && i.message.includes('lookahead'));
    expect(ahead, issues.map((i) => `${i.code}: ${i.message}`).join('\n')).toBeDefined();
    expect(ahead!.message).toMatch(/^lookup `roles`: `key`: the regular expression \/-\(\?=\\d\)\/ uses a lookahead `\(\?=…\)`/);
    expect(ahead!.location).toMatchObject({ file, ...positionOf('unsupported-lookup.yaml', '/-(?=') });
  });

  it('the same mapping with patterns RE2 runs compiles', async () => {
    await expect(loadMapping(`${DIR}mapping.yaml`, { env: {} }).then((m) => compileMapping(m))).resolves.toBeDefined();
  });
});

describe('regexProblems', () => {
  it('finds every literal of the tree (lambdas, predicates, $eval-free) and points at its opening slash', () => {
    const src = '( $f := function($s) { $match($s, /a(?=b)/) }; $filter(xs, function($v) { $contains($v, /(x)\\1/im) }) )';
    const found = regexProblems(src, jsonata(src).ast());
    expect(found.map((p) => src.slice(p.offset, p.offset + 4))).toEqual(['/a(?', '/(x)']);
  });

  it('regexStart: after flags, with slashes inside a class', () => {
    const src = '$split(s, /[/]+/m)';
    const node = (jsonata(src).ast() as unknown as { arguments: unknown[] }).arguments[1] as Parameters<typeof regexStart>[1];
    expect(regexStart(src, node)).toBe(src.indexOf('/[/]'));
  });
});
