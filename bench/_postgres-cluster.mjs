// A throw-away PostgreSQL cluster for the benches (the tests have their own: test/helpers/postgres.ts): initdb in a
// temp folder, `postgres` on a free port of 127.0.0.1, trust auth; as root it runs as the `postgres` OS user.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import { join } from 'node:path';

function binDir() {
  const onPath = spawnSync('sh', ['-c', 'command -v initdb'], { encoding: 'utf8' }).stdout.trim();
  if (onPath && existsSync(join(onPath, '..', 'postgres'))) return join(onPath, '..');
  const root = '/usr/lib/postgresql';
  for (const v of existsSync(root) ? readdirSync(root).sort((a, b) => b - a) : []) if (existsSync(join(root, v, 'bin', 'initdb'))) return join(root, v, 'bin');
  throw new Error('PostgreSQL server binaries (initdb, postgres) not found: install postgresql-15 (.ci/run does)');
}

const asRoot = process.getuid?.() === 0;
const command = (bin, args) => (asRoot ? ['setpriv', ['--reuid=postgres', '--regid=postgres', '--init-groups', '--', bin, ...args]] : [bin, args]);

async function freePort() {
  const s = createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

/** Starts the cluster; `url(db)` is a trusted URL, `stop()` shuts it down and removes its folder. */
export async function startPostgresCluster() {
  const bin = binDir();
  const dir = mkdtempSync(join(os.tmpdir(), 'care-etl-bench-pg-'));
  const data = join(dir, 'data');
  mkdirSync(join(dir, 'sock'));
  if (asRoot) spawnSync('chown', ['-R', 'postgres:postgres', dir]);
  const [ic, ia] = command(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
  const init = spawnSync(ic, ia, { encoding: 'utf8' });
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`);
  const port = await freePort();
  // fsync stays on (the default): the figures are those of a real server's durability.
  const [c, a] = command(join(bin, 'postgres'), ['-D', data, '-h', '127.0.0.1', '-p', String(port), '-k', join(dir, 'sock')]);
  const server = spawn(c, a, { stdio: 'ignore' });
  const { default: pg } = await import('pg');
  for (let i = 0; ; i++) {
    const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
    try {
      await client.connect();
      await client.end();
      break;
    } catch (err) {
      await client.end().catch(() => {});
      if (i > 300) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    url: (db = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${db}`,
    async stop() {
      server.kill('SIGINT');
      await once(server, 'exit');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
