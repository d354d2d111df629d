/**
 * Issue 16: a function parameter (or a `:=` variable) named `$ref` is the user's own variable in its scope, as
 * JSONata evaluates it: no "`$ref` must be called directly" error, no `$ref` dependency from it, and the
 * library's `$ref` still works outside that scope. Fixtures: test/fixtures/ref-parameter/.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { compileMapping, type EvalContext } from '../../src/mapping/compile-mapping.js';
import { loadMapping } from '../../src/mapping/load-mapping.js';
import { issueWith, issuesOf, positionIn } from './helpers.js';

const fx = (name: string) => fileURLToPath(new URL(`../fixtures/ref-parameter/${name}`, import.meta.url));
const ctx: EvalContext = { resolveRef: (name, key) => `${name === 'patient' ? 'Patient' : 'CareTeam'}/new-${key}`, now: new Date('2025-01-01T00:00:00Z') };

describe('`$ref` as the name of a parameter or a variable', () => {
  it('is accepted: the parameter and the variable are the user’s, the library’s $ref still orders and resolves', async () => {
    const c = compileMapping(await loadMapping(fx('mapping.yaml'), { env: {} }));
    expect(c.order).toEqual(['patient', 'careteam']);
    expect(c.resources.get('careteam')!.refs).toEqual(['patient']);
    const team = { id: 't1', subject: { reference: 'Patient/p1', display: 'Ann' } };
    expect(await c.resources.get('careteam')!.evalMap(team, ctx)).toEqual({
      resourceType: 'CareTeam',
      status: 'active',
      name: 'for Ann',
      subject: { reference: 'Patient/new-p1' },
    });
  });

  it('passed around as a value without being bound by the user, is still an error at its position', async () => {
    const { issues } = await issuesOf(async () => compileMapping(await loadMapping(fx('bad.yaml'), { env: {} })));
    const issue = issueWith(issues, 'ref-dynamic');
    expect(issue.message).toContain('$ref must be called directly');
    // the file's own `$ref` after `$f := ` (the header comment names it too)
    expect(issue.location).toMatchObject({
      line: positionIn('../ref-parameter/bad.yaml', '$ref;').line,
      column: positionIn('../ref-parameter/bad.yaml', '$ref;').column,
    });
  });
});
