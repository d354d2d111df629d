/**
 * Issue 28 item 1: the care teams start while the patients' verification listing is read (src/pipeline/listed-targets.ts).
 * Real HTTP against the sandbox (15 ms latency, pages of 5) through a loopback proxy that records, in the order the
 * server saw them, the ids each Patient listing page answered and the patient each care team create refers to:
 * - a care team is sent before the verification listing of its type's target finished;
 * - but never before its own patient was listed.
 * A patient the verification finds missing (a gateway answering a create with an id it does not store): its care team
 * is not sent, and is rejected in the same words as when care teams started after the whole patient phase.
 */
import { createServer, request, Agent } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import { startGatewayServer } from '../helpers/gateway-server.js';
import { connectionOf, makeClinic } from './helpers.js';

type Seen = { kind: 'listed'; ids: string[] } | { kind: 'team'; patient: string };

/** A proxy in front of `target` noting each Patient page's ids when its answer was sent and each CareTeam create's patient on arrival. */
async function startNotingProxy(target: string, patientPageDelayMs = 0): Promise<{ url: string; seen: Seen[]; close(): Promise<void> }> {
  const t = new URL(target);
  const agent = new Agent({ keepAlive: true });
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.method === 'POST' && req.url === '/CareTeam') {
        const team = JSON.parse(body.toString()) as { subject: { reference: string } };
        seen.push({ kind: 'team', patient: team.subject.reference.replace('Patient/', '') });
      }
      const up = request({ host: t.hostname, port: t.port, method: req.method, path: req.url, headers: req.headers, agent }, (ur) => {
        const answer: Buffer[] = [];
        ur.on('data', (c: Buffer) => answer.push(c));
        ur.on('end', () => {
          const text = Buffer.concat(answer);
          const page = req.method === 'GET' && req.url?.startsWith('/Patient') && ur.statusCode === 200;
          setTimeout(
            () => {
              res.writeHead(ur.statusCode!, ur.headers);
              res.end(text, () => {
                if (!page) return;
                const bundle = JSON.parse(text.toString()) as { entry?: { resource: { id: string } }[] };
                seen.push({ kind: 'listed', ids: (bundle.entry ?? []).map((e) => e.resource.id) });
              });
            },
            page ? patientPageDelayMs : 0,
          );
        });
      });
      up.on('error', () => res.destroy());
      up.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
        agent.destroy();
      }),
  };
}

let sb: Sandbox;
beforeAll(async () => {
  sb = await startSandbox({ tenants: ['t-streamed'], observationsPerPatient: 0, faults: { latencyMs: 15 } });
});
afterAll(async () => {
  await sb.close();
});

describe("care teams during the patients' verification listing", () => {
  it('sends a care team before the listing finished, never before its own patient was listed', async () => {
    const N = 60;
    const clinic = makeClinic(N, 3, 'care-etl-streamed-');
    const proxy = await startNotingProxy(sb.url);
    try {
      const report = await runPipeline({
        mappingFile: clinic.mapping,
        env: {},
        connection: { ...connectionOf(sb, 't-streamed'), baseUrl: proxy.url },
        statePath: clinic.state,
        rejectsFile: clinic.rejects,
        indexPageSize: 5, // the verification listing of the 60 patients: 12 pages
      });
      expect(report.exitCode).toBe(0);
      expect(report.verification?.map((v) => [v.mapping, v.checked])).toEqual([
        ['patient', N],
        ['practitioner', 3],
        ['careteam', N],
      ]);
      expect(report.mappings.careteam).toMatchObject({ created: N, rejected: 0 });
      const listed = new Set<string>();
      const early: string[] = [];
      const lastPage = proxy.seen.findLastIndex((s) => s.kind === 'listed');
      proxy.seen.forEach((s, i) => {
        if (s.kind === 'listed') for (const id of s.ids) listed.add(id);
        else {
          expect(listed.has(s.patient), `the care team of Patient/${s.patient} was sent before that patient was listed`).toBe(true);
          if (i < lastPage) early.push(s.patient);
        }
      });
      // Before: every care team waited for the whole listing (and the rest of the patient phase).
      expect(early.length).toBeGreaterThan(0);
    } finally {
      await proxy.close();
    }
  });

  it('keeps the care team of a patient the verification finds missing unsent, rejected in the same words', async () => {
    const gateway = await startGatewayServer({ answerIdOnce: { type: 'Patient', id: 'ghost-1' } });
    try {
      const clinic = makeClinic(4, 2, 'care-etl-streamed-ghost-');
      // Its one listing page answered 300 ms late: the care teams are mapped (and wait) while the listing is read.
      const proxy = await startNotingProxy(gateway.url, 300);
      const report = await runPipeline({
        mappingFile: clinic.mapping,
        env: {},
        connection: { baseUrl: proxy.url, apiKey: 'sk-streamed', emrId: 'emr', tenantId: 't-ghost' },
        statePath: clinic.state,
        rejectsFile: clinic.rejects,
      }).finally(() => proxy.close());
      const missing = report.verification?.find((v) => v.mapping === 'patient')?.missing ?? [];
      expect(missing).toMatchObject([{ serverId: 'ghost-1' }]);
      const ghostKey = missing[0]!.key;
      expect(report.mappings.careteam).toMatchObject({ created: 3, rejected: 1 });
      expect(gateway.stored('CareTeam').map((c) => (c.subject as { reference: string }).reference)).not.toContain('Patient/ghost-1');
      const teamRejects = readFileSync(clinic.rejects, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { mapping: string; key: string; stage: string; issues: { code: string; message: string }[] })
        .filter((r) => r.mapping === 'careteam');
      expect(teamRejects.map((r) => ({ key: r.key, stage: r.stage, issues: r.issues.map((i) => [i.code, i.message]) }))).toEqual([
        {
          key: ghostKey,
          stage: 'transform',
          issues: [['ref-rejected', `mapping \`careteam\` map: patient \`${ghostKey}\` was rejected in this run, so this reference cannot be resolved`]],
        },
      ]);
    } finally {
      await gateway.close();
    }
  });
});
