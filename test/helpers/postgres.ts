/**
 * A real PostgreSQL for the tests: a throw-away cluster (initdb) started on a free port of 127.0.0.1, one
 * database per test. Trust on loopback, except one password-protected role (redaction tests). As root (CI, this
 * machine) the server runs as the `postgres` OS user. No server binaries: the tests fail (never skip).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

export const PG_PASSWORD_ROLE = 'care_pw';
export const PG_PASSWORD = 'Pg-S3cret-never-shown';

export interface PgCluster {
  port: number;
  /** A fresh database (owned by the password role); its URL for the trusted `postgres` role. */
  createDatabase(): Promise<string>;
  /**
   * A fresh, empty state: a new schema (`?schema=`) of one database shared by the calls — as isolated as a database
   * for care-etl (all its tables, and its lock keys, are per schema), at a fraction of CREATE DATABASE's cost.
   */
  freshState(): Promise<string>;
  /** The URL of `db` for the password-protected role, password included. */
  passwordUrl(db: string): string;
  /** Runs SQL as the superuser in `db`. */
  query(db: string, sql: string, values?: unknown[]): Promise<pg.QueryResult>;
  stop(): Promise<void>;
}

function binDir(): string {
  const onPath = spawnSync('sh', ['-c', 'command -v initdb'], { encoding: 'utf8' }).stdout.trim();
  if (onPath && existsSync(join(onPath, '..', 'postgres'))) return join(onPath, '..');
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions) if (existsSync(join(root, v, 'bin', 'initdb'))) return join(root, v, 'bin');
  throw new Error('PostgreSQL server binaries (initdb, postgres) not found: install postgresql-15 (.ci/run does)');
}

const asRoot = process.getuid?.() === 0;

/** As root, the server must run as another user: `postgres` (created by the Debian package). */
function command(bin: string, args: string[]): [string, string[]] {
  return asRoot ? ['setpriv', ['--reuid=postgres', '--regid=postgres', '--init-groups', '--', bin, ...args]] : [bin, args];
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

function chownTree(dir: string): void {
  if (!asRoot) return;
  const r = spawnSync('chown', ['-R', 'postgres:postgres', dir]);
  if (r.status !== 0) throw new Error(`chown ${dir} to postgres failed: ${r.stderr}`);
}

async function waitReady(port: number, server: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (server.exitCode !== null) throw new Error(`postgres exited (${server.exitCode}): ${log()}`);
    const c = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
    try {
      await c.connect();
      await c.end();
      return;
    } catch {
      await c.end().catch(() => {});
      if (Date.now() > deadline) throw new Error(`postgres did not accept connections in 30 s: ${log()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

export async function startPostgres(): Promise<PgCluster> {
  const bin = binDir();
  const dir = mkdtempSync(join(tmpdir(), 'care-etl-pg-'));
  const data = join(dir, 'data');
  const sockets = join(dir, 'sock');
  mkdirSync(sockets);
  chownTree(dir);
  const [initCmd, initArgs] = command(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
  const init = spawnSync(initCmd, initArgs, { encoding: 'utf8' });
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr || init.error}`);
  writeFileSync(
    join(data, 'pg_hba.conf'),
    [`host all ${PG_PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256`, 'host all all 127.0.0.1/32 trust', 'local all all trust', ''].join('\n'),
  );
  chownTree(dir);
  const port = await freePort();
  const [cmd, args] = command(join(bin, 'postgres'), ['-D', data, '-h', '127.0.0.1', '-p', String(port), '-k', sockets, '-F', '-c', 'max_connections=60']);
  const server = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  server.stderr!.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4000)));
  const killOnExit = () => server.kill('SIGKILL');
  process.once('exit', killOnExit);
  await waitReady(port, server, () => log);

  const admin = (db: string) => new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: db });
  const query = async (db: string, sql: string, values?: unknown[]) => {
    const c = admin(db);
    await c.connect();
    try {
      return await c.query(sql, values);
    } finally {
      await c.end();
    }
  };
  await query('postgres', `CREATE ROLE ${PG_PASSWORD_ROLE} LOGIN PASSWORD '${PG_PASSWORD}'`);
  let n = 0;
  let shared: Promise<string> | undefined;
  const createDatabase = async () => {
    const name = `t${++n}_${process.pid}`;
    await query('postgres', `CREATE DATABASE ${name} OWNER ${PG_PASSWORD_ROLE}`);
    return `postgres://postgres@127.0.0.1:${port}/${name}`;
  };
  return {
    port,
    createDatabase,
    async freshState() {
      shared ??= createDatabase();
      return `${await shared}?schema=s${++n}`;
    },
    passwordUrl: (db) => `postgres://${PG_PASSWORD_ROLE}:${PG_PASSWORD}@127.0.0.1:${port}/${db}`,
    query,
    async stop() {
      process.removeListener('exit', killOnExit);
      if (server.exitCode === null) {
        const exited = new Promise((r) => server.once('exit', r));
        server.kill('SIGINT'); // fast shutdown
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
