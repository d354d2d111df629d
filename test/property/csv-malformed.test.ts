/**
 * Issue 12 — property: malformed CSV quotes lose nothing silently.
 *
 * Generated CSV exports of clean rows (plain and quoted cells, quoted cells with `""`, the delimiter and line
 * breaks inside, LF / CRLF / CR line endings, a BOM now and then) with malformed lines inserted at random
 * places:
 *   - `stray`  a closing quote followed by other text, the field then running past its line: `"ab" ,x,2`
 *   - `open`   a quote opened and never closed on its line: `"ab,x,2` (also as the very last line)
 *   - `inner`  a quote inside an unquoted field: `ab"c,x,2`
 * run through `runPipeline` in dry-run mode (a Patient mapping keyed by MRN) into a temporary folder, with the
 * default `csv.maxQuotedLines` or a small one (2–5).
 *
 * Invariants: read = written + rejected; every malformed line is exactly one source-stage reject at its line;
 * every clean row — before and after each defect — is written, in order (src/sources/csv-quote-guard.ts: a
 * broken quote costs at most the line where it opened).
 *
 * Runs: a tenth of CARE_PROPERTY_RUNS (default 2000 here; the run-invariants suite defaults to 1000) → 200 cases.
 * Seed: CARE_PROPERTY_SEED (default fixed); a failure prints the seed and path to replay.
 *   CARE_PROPERTY_RUNS=20000 npx vitest run test/property/csv-malformed.test.ts
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';

const TOTAL = Math.max(10, Number(process.env.CARE_PROPERTY_RUNS ?? 2000));
const RUNS = Math.max(10, Math.round(TOTAL / 10));
const SEED = Number(process.env.CARE_PROPERTY_SEED ?? 20_251_212);

type Defect = 'stray' | 'open' | 'inner';

interface Line {
  kind: 'clean' | Defect;
  text: string;
  /** Line breaks inside the text (multi-line quoted cells). */
  breaks: number;
  mrn?: string;
}

interface Case {
  text: string;
  delimiter: ',' | ';';
  maxQuotedLines?: number;
  /** Clean rows' MRNs in file order. */
  clean: string[];
  /** Lines of the malformed records. */
  defectLines: number[];
  label: string;
}

const word = fc.stringMatching(/^[A-Za-z][A-Za-z0-9]{0,6}$/);
const EOL = ['\n', '\n', '\r\n', '\r\n', '\r'] as const;

/** A clean cell: plain, or quoted — starting with a letter, holding `""`, the delimiter, spaces, maybe one line break. */
const cellArb = (d: string) =>
  fc.oneof(
    { weight: 4, arbitrary: word.map((w) => ({ text: w, breaks: 0 })) },
    {
      weight: 3,
      arbitrary: fc
        .tuple(word, fc.constantFrom('', ' ', `${d} `, '""', ` ""x""${d}`), word, fc.constantFrom('', '', '\n', '\r\n'), word)
        .map(([a, mid, b, br, c]) => ({ text: `"${a}${mid}${b}${br}${br ? c : ''}"`, breaks: br ? 1 : 0 })),
    },
  );

const caseArb: fc.Arbitrary<Case> = fc
  .record({
    delimiter: fc.constantFrom<',' | ';'>(',', ',', ';'),
    maxQuotedLines: fc.oneof({ weight: 2, arbitrary: fc.constant<number | undefined>(undefined) }, { weight: 3, arbitrary: fc.integer({ min: 2, max: 5 }) }),
    bom: fc.boolean(),
    trailingEol: fc.boolean(),
    rows: fc.array(fc.record({ name: word, noteSeed: fc.nat(), eol: fc.constantFrom(...EOL) }), { minLength: 1, maxLength: 40 }),
    defects: fc.array(
      fc.record({
        at: fc.nat(),
        kind: fc.constantFrom<Defect>('stray', 'open', 'inner'),
        a: word,
        b: word,
        junk: fc.constantFrom(' ', 'x', ' x'),
        eol: fc.constantFrom(...EOL),
      }),
      { minLength: 1, maxLength: 6 },
    ),
    openLast: fc.boolean(),
  })
  .chain((g) =>
    fc.array(cellArb(g.delimiter), { minLength: g.rows.length, maxLength: g.rows.length }).map((notes) => {
      const d = g.delimiter;
      const lines: (Line & { eol: string })[] = g.rows.map((r, i) => {
        const mrn = `P${String(i + 1).padStart(4, '0')}`;
        const note = notes[i]!;
        return { kind: 'clean' as const, text: [mrn, r.name, note.text].join(d), breaks: note.breaks, mrn, eol: r.eol };
      });
      // Defects at random places (never before the header).
      for (const x of g.defects) {
        const text = x.kind === 'stray' ? `"${x.a}"${x.junk}${d}${x.b}${d}2` : x.kind === 'open' ? `"${x.a}${d}${x.b}${d}2` : `${x.a}"${x.b}${d}${x.b}${d}2`;
        lines.splice(x.at % (lines.length + 1), 0, { kind: x.kind, text, breaks: 0, eol: x.eol });
      }
      if (g.openLast) lines.push({ kind: 'open', text: `"last${d}x${d}2`, breaks: 0, eol: '\n' });
      let text = g.bom ? '\ufeff' : '';
      text += `MRN${d}NAME${d}NOTE\n`;
      let line = 2;
      const defectLines: number[] = [];
      const clean: string[] = [];
      lines.forEach((l, i) => {
        if (l.kind === 'clean') clean.push(l.mrn!);
        else defectLines.push(line);
        text += l.text;
        const last = i === lines.length - 1;
        if (!last || (g.trailingEol && !(g.openLast && last))) text += l.eol;
        line += l.breaks + 1;
      });
      return {
        text,
        delimiter: d,
        maxQuotedLines: g.maxQuotedLines,
        clean,
        defectLines,
        label: `${lines.length} records, ${defectLines.length} malformed (${lines
          .filter((l) => l.kind !== 'clean')
          .map((l) => l.kind)
          .join(' ')}), maxQuotedLines ${g.maxQuotedLines ?? 'default'}`,
      };
    }),
  );

function mappingYaml(c: Case): string {
  const csv: Record<string, unknown> = {};
  if (c.delimiter !== ',') csv.delimiter = c.delimiter;
  if (c.maxQuotedLines !== undefined) csv.maxQuotedLines = c.maxQuotedLines;
  return [
    'version: 1',
    'sources:',
    `  people: { path: data.csv${Object.keys(csv).length ? `, csv: ${JSON.stringify(csv)}` : ''} }`,
    'resources:',
    '  - name: patient',
    '    type: Patient',
    '    from: people',
    '    key: MRN',
    '    map: |',
    '      { "identifier": [{ "system": "urn:test:mrn", "value": MRN }], "name": [{ "family": NAME }] }',
    '',
  ].join('\n');
}

let base: string;
let caseNo = 0;
beforeAll(() => {
  base = mkdtempSync(join(tmpdir(), 'care-etl-csv-malformed-'));
});
afterAll(() => {
  rmSync(base, { recursive: true, force: true });
});

describe('malformed CSV quotes (property)', () => {
  it(
    `read = written + rejected, every malformed line is one reject, every clean row is written (${RUNS} cases)`,
    async () => {
      await fc.assert(
        fc.asyncProperty(caseArb, async (c) => {
          const dir = join(base, `case-${++caseNo}`);
          mkdirSync(dir);
          try {
            writeFileSync(join(dir, 'data.csv'), c.text);
            writeFileSync(join(dir, 'mapping.yaml'), mappingYaml(c));
            const out = join(dir, 'out');
            const report = await runPipeline({ mappingFile: join(dir, 'mapping.yaml'), dryRun: true, outDir: out, env: {} });
            const t = report.totals;
            expect(t.read, c.label).toBe(c.clean.length + c.defectLines.length);
            expect(t.read, c.label).toBe(t.written + t.rejected);
            const rejects = readFileSync(join(out, 'rejects.ndjson'), 'utf8')
              .split('\n')
              .filter(Boolean)
              .map((l) => JSON.parse(l) as { stage: string; line: number; issues: { code: string }[] });
            expect(
              rejects.map((r) => `${r.stage}:${r.line}`),
              c.label,
            ).toEqual(c.defectLines.map((l) => `source:${l}`));
            for (const r of rejects) expect(['csv-quote', 'csv-syntax']).toContain(r.issues[0]!.code);
            const written = readFileSync(join(out, 'Patient.ndjson'), 'utf8')
              .split('\n')
              .filter(Boolean)
              .map((l) => (JSON.parse(l) as { identifier: { value: string }[] }).identifier[0]!.value);
            expect(written, c.label).toEqual(c.clean);
          } finally {
            rmSync(dir, { recursive: true, force: true });
          }
        }),
        { numRuns: RUNS, seed: SEED, endOnFailure: true },
      );
    },
    Math.max(60_000, RUNS * 500),
  );
});
