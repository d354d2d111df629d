/**
 * Without a proxy the client takes undici's Agent from its own file (src/api/client.ts), not from undici's index,
 * which loads fetch, WebSocket, caches and mocks at every start. That path is undici's internals: this test fails
 * when an upgrade moves it, and checks that a process making a direct client never loads the index (a proxy does:
 * test/api/proxy*.test.ts).
 */
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Agent } from 'undici';
import { describe, expect, it } from 'vitest';
import { createDispatcher } from '../../src/api/client.js';

const require = createRequire(import.meta.url);

describe("undici's Agent taken from its own file", () => {
  it('is the very class undici exports', () => {
    expect(require('undici/lib/dispatcher/agent.js')).toBe(Agent);
    const direct = createDispatcher({ connections: 2, connectTimeoutMs: 1000, requestTimeoutMs: 1000 }, {});
    expect(direct).toBeInstanceOf(Agent);
    void direct.close();
  });

  it("a process that makes the client never loads undici's index", () => {
    // The built client, as the CLI runs it (npm ci builds dist/ before the tests).
    const dist = fileURLToPath(new URL('../../dist/api/client.js', import.meta.url));
    const script = `import(${JSON.stringify(dist)}).then((m) => {
      m.createDispatcher({ connections: 2, connectTimeoutMs: 1000, requestTimeoutMs: 1000 }, {}).close();
      const loaded = Object.keys(require.cache).filter((f) => /node_modules[\\\\/]undici[\\\\/]/.test(f));
      console.log(JSON.stringify({ index: loaded.some((f) => /undici[\\\\/]index\\.js$/.test(f)), modules: loaded.length }));
    })`;
    const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' })) as { index: boolean; modules: number };
    expect(out.index).toBe(false);
    expect(out.modules).toBeGreaterThan(0);
    expect(out.modules).toBeLessThan(60);
  });
});
