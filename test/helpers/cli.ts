import { spawn } from 'node:child_process';
import { Console } from 'node:console';
import { Writable } from 'node:stream';
import { cpSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const BIN = join(ROOT, 'bin', 'run.js');

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * The caller's environment without CARE_* and `CI`: both make the CLI refuse the embedded sandbox (a GitHub-style
 * runner sets CI=true), so a test that wants them passes them in `env`. Without vitest's NODE_ENV=test too: oclif
 * warns about development matters under it (`UnparsedCommand` after a usage error), which users never see.
 */
export function cleanEnv(): Record<string, string | undefined> {
  return Object.fromEntries(Object.entries(workerEnv()).filter(([k]) => !k.startsWith('CARE_') && k !== 'CI' && k !== 'NODE_ENV'));
}

/** The test worker's own environment — not the one an in-process CLI run has set meanwhile (`runCliInProcess`). */
export function workerEnv(): NodeJS.ProcessEnv {
  return savedEnv ?? process.env;
}
let savedEnv: NodeJS.ProcessEnv | undefined;

/** Runs the built CLI (`npm ci` builds it) with a clean environment (`cleanEnv`) plus `env`. */
export function runCli(args: string[], opts: { env?: Record<string, string | undefined>; cwd?: string; timeoutMs?: number } = {}): Promise<CliResult> {
  const base = cleanEnv();
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: opts.cwd ?? ROOT, env: { ...base, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 120_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolvePromise({ code, signal, stdout, stderr });
    });
  });
}

/** A private copy of a folder (e.g. examples/clinic) so that its `.care-etl/` state stays in a temp dir. */
export function copyTree(from: string, prefix = 'care-etl-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cpSync(join(ROOT, from), dir, { recursive: true, filter: (src) => !src.includes('.care-etl') });
  return dir;
}

/**
 * Runs the built CLI inside this test worker: same `CliResult` as `runCli`, without a process of its own. A spawned
 * CLI costs ~0.8 s of CPU (module loading, schema compiles); here the worker loads `dist/` once and every later run
 * reuses it. For tests that need no process of their own: no signals, no kill, no TTY, no stdin, no time-out kill.
 * Environment (`cleanEnv()` + `env`), cwd, exit code, TTY-ness, console and the process's listeners are set for the
 * run and restored after it; a per-worker queue keeps two runs from overlapping (they share all of that).
 */
export async function runCliInProcess(args: string[], opts: { env?: Record<string, string | undefined>; cwd?: string } = {}): Promise<CliResult> {
  const turn = queue.then(() => runInProcess(args, opts));
  queue = turn.then(
    () => undefined,
    () => undefined,
  );
  return turn;
}

let queue: Promise<void> = Promise.resolve();
type Oclif = typeof import('@oclif/core');
let oclif: Promise<Oclif> | undefined;
let sink: { stdout: string; stderr: string } | undefined;

/**
 * Installed once, before the CLI's first run: the CLI wraps `process.stdout.write` for good on its first run (secret
 * redaction), so the capture sits below that wrapper and stays; outside a run it writes through.
 */
function captureStreams(): void {
  for (const name of ['stdout', 'stderr'] as const) {
    const stream = process[name];
    const write = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean;
    stream.write = ((chunk: unknown, ...rest: unknown[]) => {
      if (!sink) return write(chunk, ...rest);
      sink[name] += typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8');
      const done = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
      if (done) queueMicrotask(done);
      return true;
    }) as typeof stream.write;
  }
}

function loadOclif() {
  oclif ??= (async () => {
    captureStreams();
    return import('@oclif/core');
  })();
  return oclif;
}

/** The process-wide things a run may change, saved before it and put back after it. */
function saveProcess(): () => void {
  const env = (savedEnv = { ...process.env });
  const cwd = process.cwd();
  const exitCode = process.exitCode;
  const console = globalThis.console;
  const events: string[] = ['SIGINT', 'SIGTERM', 'warning'];
  const listeners = events.map((e) => process.listeners(e as 'exit'));
  const tty = (['stdout', 'stderr'] as const).map((s) => [s, Object.getOwnPropertyDescriptor(process[s], 'isTTY')] as const);
  return () => {
    for (const k of Object.keys(process.env)) if (!(k in env)) delete process.env[k];
    Object.assign(process.env, env);
    savedEnv = undefined;
    process.chdir(cwd);
    process.exitCode = exitCode;
    globalThis.console = console;
    events.forEach((e, i) => {
      process.removeAllListeners(e);
      for (const l of listeners[i]!) process.on(e as 'exit', l);
    });
    for (const [s, d] of tty) {
      if (d) Object.defineProperty(process[s], 'isTTY', d);
      else delete (process[s] as { isTTY?: boolean }).isTTY;
    }
  };
}

/** A stream into `process[name].write` as it is at each write (the CLI's redaction, then the capture). */
function through(name: 'stdout' | 'stderr'): Writable {
  return new Writable({
    write(chunk: Buffer, _enc, done) {
      process[name].write(chunk);
      done();
    },
  });
}

async function runInProcess(args: string[], opts: { env?: Record<string, string | undefined>; cwd?: string }): Promise<CliResult> {
  const { Config, Errors, run } = await loadOclif();
  // A fresh Config each run, as a process has (~10 ms once the modules are loaded): oclif's keeps state between runs.
  const config = await Config.load(ROOT);
  // The credentials earlier runs registered are forgotten (a new process knows none): a path that does not register
  // its own would otherwise still be redacted here, and a leak test could not fail.
  const { forgetSecrets } = (await import(pathToFileURL(join(ROOT, 'dist', 'core', 'secret.js')).href)) as { forgetSecrets(): void };
  forgetSecrets();
  const restore = saveProcess();
  const out = { stdout: '', stderr: '' };
  try {
    const env = { ...cleanEnv(), ...opts.env };
    for (const k of Object.keys(process.env)) delete process.env[k];
    for (const [k, v] of Object.entries(env)) if (v !== undefined) process.env[k] = v;
    process.chdir(opts.cwd ?? ROOT);
    process.exitCode = undefined;
    // A spawned CLI's streams are pipes (no TTY); its console writes through process.stdout/stderr (redacted there).
    for (const s of ['stdout', 'stderr'] as const) Object.defineProperty(process[s], 'isTTY', { value: false, configurable: true, writable: true });
    globalThis.console = new Console({ stdout: through('stdout'), stderr: through('stderr') });
    sink = out;
    try {
      await run(args, config);
    } catch (err) {
      // What `execute` (bin/run.js) does with an error no command caught: its exit code, its message on stderr.
      const e = err as { oclif?: { exit?: number }; exitCode?: number; message?: string };
      if (!(err instanceof Errors.ExitError)) process.stderr.write(`${e.message ?? String(err)}\n`);
      process.exitCode = e.oclif?.exit ?? e.exitCode ?? 1;
    }
    // Node's warnings (process.emitWarning) are printed a tick later: still this run's stderr.
    await new Promise((r) => setImmediate(r));
    return { code: Number(process.exitCode ?? 0), signal: null, ...out };
  } finally {
    sink = undefined;
    restore();
  }
}
