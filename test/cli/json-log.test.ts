import { describe, expect, it } from 'vitest';
import { createJsonLog, requestType } from '../../src/cli/json-log.js';
import { emptyCounts } from '../../src/pipeline/run-report.js';

describe('JSON log writer', () => {
  it('progress at most once per interval per mapping; phase ends always; levels below the threshold dropped, the verdict never', () => {
    const out: string[] = [];
    let t = 0;
    const log = createJsonLog({ write: (l) => out.push(l), intervalMs: 1000, now: () => new Date(t), minLevel: 'warn' });
    const progress = (mapping: string) => log.onRunEvent({ type: 'progress', mapping, counts: emptyCounts() });
    progress('a'); // dropped: info < warn
    expect(out).toHaveLength(0);
    const info = createJsonLog({ write: (l) => out.push(l), intervalMs: 1000, now: () => new Date(t) });
    for (const ms of [0, 500, 999, 1000, 1500, 2000]) {
      t = ms;
      info.onRunEvent({ type: 'progress', mapping: 'a', counts: emptyCounts() });
    }
    info.onRunEvent({ type: 'progress', mapping: 'b', counts: emptyCounts() });
    const parsed = out.map((l) => JSON.parse(l) as { ts: string; event: string; mapping: string });
    expect(parsed.map((p) => `${p.mapping}@${p.ts.slice(17, 23)}`)).toEqual(['a@00.000', 'a@01.000', 'a@02.000', 'b@02.000']);
    log.verdict({ exitCode: 0 });
    expect(JSON.parse(out.at(-1)!)).toMatchObject({ level: 'info', event: 'verdict', exitCode: 0 });
    expect(log.verdictWritten).toBe(true);
  });

  it("a request's type from its path, never its query", () => {
    expect(requestType('/api/v1/Patient?identifier=urn:x|000031')).toBe('Patient');
    expect(requestType('/fhir/CareTeam/abc-1')).toBe('CareTeam');
    expect(requestType('/metadata')).toBeUndefined();
  });
});
