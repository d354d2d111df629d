/** In a log (stderr not a TTY) every line a run writes to stderr starts with its UTC timestamp — the verdict too. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stderrLine } from '../../src/cli/log-line.js';
import { runCliInProcess } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'care-etl-log-lines-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(join(dir, 'rows.csv'), 'MRN,DOB\n1,1980-01-02\n2,1980-02-30\n');
writeFileSync(
  join(dir, 'm.yaml'),
  'version: 1\nsources:\n  rows: { path: rows.csv }\nresources:\n  - name: patient\n    type: Patient\n    from: rows\n    key: MRN\n    map: \'{ "identifier": [{ "value": MRN }], "birthDate": $date(DOB, "YYYY-MM-DD") }\'\n',
);
const STAMPED = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ /;

describe('stderr lines in a log', () => {
  it('a dry run with a reject: every stderr line stamped, the verdict included', async () => {
    const r = await runCliInProcess(['run', join(dir, 'm.yaml'), '--dry-run', '--verbose']);
    expect(r.code, r.stderr).toBe(1);
    const lines = r.stderr.split('\n').filter(Boolean);
    expect(lines.some((l) => l.includes('Dry run complete:'))).toBe(true);
    expect(lines.filter((l) => !STAMPED.test(l))).toEqual([]);
  });

  it('stderrLine: as is on a terminal, each line stamped in a log', () => {
    const at = () => new Date('2026-11-26T03:04:05.678Z');
    expect(stderrLine('a\nb', { isTTY: true }, at)).toBe('a\nb\n');
    expect(stderrLine('a\nb', { isTTY: false }, at)).toBe('2026-11-26T03:04:05Z a\n2026-11-26T03:04:05Z b\n');
  });
});
