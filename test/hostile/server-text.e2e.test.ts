/**
 * Issue 25, item 3, over HTTP against a scripted store on 127.0.0.1 (test/helpers/listing-server.ts): no server text
 * in hand-over files or the ledger. Every create is answered 400 with an OperationOutcome whose diagnostics echo the
 * API key the server received, upper-cased and as the base64 of `apikey:KEY` (no redaction can know every transform),
 * whose code is one of those echoes too, and whose expression is a field path or an echo. The report (HTML and
 * Markdown, rendered as `--report` renders them), rejects.summary.csv and the state db (read with better-sqlite3)
 * keep the status, the FHIR issue code and the field path — never the echo; the full rejects file (0600) keeps it.
 */
import { readFileSync, statSync } from 'node:fs';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import { readRejectsFile } from '../../src/report/report-model.js';
import { renderRunReportHtml } from '../../src/report/run-report-html.js';
import { renderRunReportMarkdown } from '../../src/report/run-report-markdown.js';
import { startListingServer, type ListingServer } from '../helpers/listing-server.js';
import { makeClinic } from '../sync/helpers.js';

const KEY = 'sk-servertext-canary-5e8a';
const TENANT = 't-server-text';
const UPPER = KEY.toUpperCase();
const BASE64 = Buffer.from(`apikey:${KEY}`).toString('base64');

let server: ListingServer | undefined;
afterAll(async () => {
  await server?.close();
});

/** Every text value of every table of a SQLite file, as one string. */
function allText(dbFile: string): string {
  const db = new Database(dbFile, { readonly: true });
  try {
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[];
    return tables.map((t) => JSON.stringify(db.prepare(`SELECT * FROM "${t.name}"`).all())).join('\n');
  } finally {
    db.close();
  }
}

describe("a server's diagnostics echoing the key, transformed", () => {
  it('are absent from report.html, report.md, rejects.summary.csv and the state db; the full rejects file (0600) keeps them', async () => {
    server = await startListingServer({
      createAnswer: (_type, _body, headers) => {
        const key = String(headers['service-subscriptionkey']);
        const echo = `auth ${key.toUpperCase()} / Basic ${Buffer.from(`apikey:${key}`).toString('base64')}`;
        const issue = [
          { severity: 'error', code: 'invalid', diagnostics: echo, expression: ['Patient.name[0].family'] },
          { severity: 'error', code: key.toUpperCase(), diagnostics: echo, expression: [Buffer.from(`apikey:${key}`).toString('base64')] },
          { severity: 'error', code: 'value', details: { text: echo }, expression: ['/birthDate'] },
        ];
        return { status: 400, body: JSON.stringify({ resourceType: 'OperationOutcome', issue }) };
      },
    });
    const clinic = makeClinic(3, 1, 'care-etl-server-text-');
    const report = await runPipeline({
      mappingFile: clinic.mapping,
      env: {},
      connection: { baseUrl: server.url, apiKey: KEY, emrId: 'emr', tenantId: TENANT },
      retry: { baseDelayMs: 1, maxDelayMs: 2 },
    });
    expect(report.exitCode).toBe(1);
    expect(report.rejectsFile).toBeDefined();

    const { rejects } = await readRejectsFile(report.rejectsFile!);
    const handedOver = {
      'report.html': renderRunReportHtml({ report, rejects, includeRows: false }),
      'report.md': renderRunReportMarkdown({ report, rejects, includeRows: false }),
      'report.json': JSON.stringify(report),
      'rejects.summary.csv': readFileSync(report.rejectsSummaryFile!, 'utf8'),
      'state.db': allText(clinic.state),
    };
    for (const [file, text] of Object.entries(handedOver)) {
      for (const secret of [KEY, UPPER, BASE64]) expect(text.includes(secret), `${file} holds ${secret}`).toBe(false);
    }
    // What is kept: the status, the FHIR code and the field path.
    expect(handedOver['rejects.summary.csv']).toContain('HTTP 400');
    expect(handedOver['rejects.summary.csv']).toContain('Patient.name[0].family');
    expect(handedOver['report.html']).toContain('/birthDate');
    expect(handedOver['state.db']).toMatch(
      /failed with HTTP 400 \(POST \/Patient\): invalid at Patient\.name\[0\]\.family; server-issue; value at \/birthDate/,
    );

    // The full rejects file holds the row anyway: the server's text stays there, for whoever fixes the rows.
    const full = readFileSync(report.rejectsFile!, 'utf8');
    expect(full).toContain(BASE64);
    expect(statSync(report.rejectsFile!).mode & 0o777).toBe(0o600);
  }, 30_000);
});
