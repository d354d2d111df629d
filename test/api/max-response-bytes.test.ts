/**
 * `--max-response-bytes` below an answer's declared length (issue 25): that request fails with ResponseTooLargeError
 * and the process goes on — the unread body's abort used to surface as an unhandled error, crashing the CLI (vitest
 * fails the file on an unhandled error).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CareClient } from '../../src/api/client.js';
import { resolveConnection } from '../../src/api/connection.js';
import { ResponseTooLargeError } from '../../src/api/errors.js';
import { startSandbox, type Sandbox } from '../../src/sandbox/server.js';

let sb: Sandbox;
beforeAll(async () => {
  sb = await startSandbox({ apiKey: 'max-bytes-key', emrId: 'e', tenants: ['t'] });
});
afterAll(() => sb.close());

it('an answer longer than --max-response-bytes by its content-length fails that request only, twice in a row', async () => {
  const c = new CareClient(resolveConnection({ baseUrl: sb.url, apiKey: 'max-bytes-key', emrId: 'e', tenantId: 't', maxResponseBytes: 5 }), { retry: false });
  try {
    for (let i = 0; i < 2; i++) {
      const err = await c
        .list('Patient')
        .next()
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(ResponseTooLargeError);
    }
  } finally {
    await c.close();
  }
});
