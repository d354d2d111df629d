/**
 * Issue 25, item 3: what of a server's OperationOutcome may be handed over — the FHIR issue code and a field path
 * of the resource schemas — and the free text kept apart (`serverText`), worded by `handOverIssue` without it.
 */
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/api/errors.js';
import { handOverPath, outcomeToIssues } from '../../src/api/outcome.js';
import { handOverIssue } from '../../src/pipeline/hand-over.js';

const ECHO = 'SK-LIVE-CANARY QXBpa2V5OnNrLWxpdmUtY2FuYXJ5';

describe("a server's OperationOutcome as care-etl keeps it", () => {
  it('paths: JSON pointers and FHIRPaths whose every step is a schema property or an index', () => {
    for (const ok of ['/birthDate', '/name/0/family', 'Patient.name[0].family', 'CareTeam.participant[2].member.reference']) expect(handOverPath(ok)).toBe(ok);
    for (const bad of ['/QXBpa2V5OnNrLWxpdmUtY2FuYXJ5', 'Patient.SKLIVECANARY', '/name/Smith', 'name; drop', '', 'x'.repeat(300), 12, undefined]) {
      expect(handOverPath(bad)).toBeUndefined();
    }
  });

  it('codes: FHIR issue types kept, anything else `server-issue`; the text marked serverText', () => {
    const issues = outcomeToIssues([
      { severity: 'error', code: 'invalid', diagnostics: ECHO, expression: ['/birthDate'] },
      { severity: 'error', code: 'SK-LIVE-CANARY', diagnostics: ECHO, expression: [ECHO] },
    ]);
    expect(issues.map((i) => [i.code, i.path, i.serverText])).toEqual([
      ['invalid', '/birthDate', true],
      ['server-issue', undefined, true],
    ]);
    expect(issues[0]!.message).toBe(ECHO); // the full rejects file keeps it
  });

  it('the error message names codes and paths only; hand-over text has no server text', () => {
    const err = new ApiError({
      status: 400,
      operation: 'create',
      resourceType: 'Patient',
      method: 'POST',
      path: '/Patient',
      outcome: [{ code: 'invalid', diagnostics: ECHO, expression: ['/birthDate'] }],
    });
    expect(err.message).toBe('create Patient failed with HTTP 400 (POST /Patient): invalid at /birthDate');
    for (const i of err.toIssues()) expect(handOverIssue(i).message).not.toContain('CANARY');
    expect(handOverIssue(err.toIssues()[1]!).message).toBe("the server's invalid issue at /birthDate (its text is in the rejects file)");
  });
});
