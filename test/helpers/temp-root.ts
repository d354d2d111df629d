/**
 * Vitest global setup: every temporary folder of a test run — the tests', the CLIs they spawn, PostgreSQL's data
 * directories — under one root (TMPDIR, inherited by the workers and their children), removed when the run ends.
 * Before it, each `npm test` left some 250 folders in the system's temporary directory.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';

export default function setup(): () => void {
  const root = mkdtempSync(join(os.tmpdir(), 'care-etl-test-run-'));
  // Traversable by other users: test/helpers/postgres.ts runs the server as `postgres` when the tests run as root.
  // Each test's own folder inside is mkdtemp's 0700.
  chmodSync(root, 0o755);
  process.env.TMPDIR = root;
  return () => rmSync(root, { recursive: true, force: true });
}
