import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';
import { client, samplePatient } from './helpers.js';

/*
 * Issue 12: the sandbox never answers 5xx to client input. A body nested 10,000 deep used to reach the recursive
 * merge patch (and validation, serialisation) and come back as a 500 "Maximum call stack size exceeded".
 */

let sb: Sandbox;
let c: ReturnType<typeof client>;
let patientId: string;
beforeAll(async () => {
  sb = await startSandbox({ observationsPerPatient: 0 });
  c = client(sb);
  patientId = (await c.create('Patient', samplePatient())).id;
});
afterAll(async () => {
  await c.close();
  await sb.close();
});

/** `{"extension":{"a":{"a":…}}}` as text (never built as an object here: that would need the stack too). */
const deepText = (depth: number, head: string): string => `${head}"extension":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`;

describe('deep bodies are a 400 with an OperationOutcome, never a 500', () => {
  test('a 10,000-deep JSON merge patch', async () => {
    const r = await c.call('PATCH', `/Patient/${patientId}`, {
      raw: deepText(10_000, '{'),
      headers: { 'Content-Type': 'application/merge-patch+json' },
    });
    expect(r.status, r.text).toBe(400);
    expect(r.body).toMatchObject({
      resourceType: 'OperationOutcome',
      issue: [{ severity: 'error', code: 'too-costly', diagnostics: 'request body is nested deeper than 64 levels' }],
    });
  });

  test('the same body as a PUT and as a create; arrays too', async () => {
    const put = await c.call('PUT', `/Patient/${patientId}`, { raw: deepText(10_000, `{"resourceType":"Patient","id":"${patientId}",`) });
    expect(put.status, put.text).toBe(400);
    const post = await c.call('POST', '/Patient', { raw: deepText(10_000, '{"resourceType":"Patient",') });
    expect(post.status, post.text).toBe(400);
    const arrays = await c.call('POST', '/Patient', { raw: `{"resourceType":"Patient","name":${'['.repeat(100_000)}${']'.repeat(100_000)}}` });
    expect(arrays.status, arrays.text).toBe(400);
    expect(arrays.body.resourceType).toBe('OperationOutcome');
  });

  test('nothing was changed, and ordinary updates still work', async () => {
    const read = await c.call('GET', `/Patient/${patientId}`);
    expect(read.body.meta.versionId).toBe('1');
    const ok = await c.call('PATCH', `/Patient/${patientId}`, { body: { active: false }, headers: { 'Content-Type': 'application/merge-patch+json' } });
    expect(ok.status, ok.text).toBe(200);
    expect(sb.stats().byStatus['500']).toBeUndefined();
  });
});
