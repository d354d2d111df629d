/**
 * The one CLI shell every command extends (after `SfCommand` in salesforcecli): it owns flag-parse errors,
 * the `--json` envelope, error rendering with hints, exit codes, redaction of every known secret on every
 * path, SIGINT/SIGTERM → an abort signal, progress selection and the log level. A command keeps only
 * flags → one library call → a summary.
 */
import { Command, Errors } from '@oclif/core';
import type { Input, ParserOutput } from '@oclif/core/interfaces';

type Out = Record<string, unknown>;
import { setMaxListeners } from 'node:events';
import { stripVTControlCharacters } from 'node:util';
import { CareEtlError, ExitCode } from '../core/issues.js';
import { redactKnown, registerProxySecrets, registerSecret } from '../core/secret.js';
import { describeError, JSON_FORMAT_VERSION, type ErrorJson } from './render.js';
import { flag } from './flags.js';
import { createJsonLog, type JsonLog } from './json-log.js';
import { stderrLine } from './log-line.js';
import { closest } from '../mapping/closest.js';

export type LogLevel = 'quiet' | 'normal' | 'verbose';
export type ProgressMode = 'bar' | 'lines' | 'none';

/** The shell's services, for a library-side helper shared by several thin commands (e.g. `state …`). */
export interface CommandShell {
  json: boolean;
  progress: ProgressMode;
  signal: AbortSignal;
  onRequest?: (r: { method: string; path: string; status: number | 'error'; ms: number }) => void;
  log(line: string): void;
  /** See `CareCommand.notice`. */
  notice(line: string | undefined): void;
  fail(err: unknown): ErrorJson;
}

let outputRedacted = false;
const unredacted = new Map<NodeJS.WriteStream, (chunk: string) => boolean>();

/** For the one output that prints a credential on purpose (the sandbox's demo key, as `export` lines). */
export function writeUnredacted(stream: NodeJS.WriteStream, text: string): void {
  (unredacted.get(stream) ?? ((t: string) => stream.write(t)))(text);
}

/**
 * Last line of defence: whatever reaches stdout/stderr (oclif's own messages included) is scrubbed of the
 * credentials this process knows. Secrets are registered before anything is printed (see `init`).
 */
function redactProcessOutput(): void {
  if (outputRedacted) return;
  outputRedacted = true;
  for (const stream of [process.stdout, process.stderr]) {
    const write = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean;
    unredacted.set(stream, (t) => write(t));
    stream.write = ((chunk: unknown, ...rest: unknown[]) => {
      if (typeof chunk === 'string') return write(redactKnown(chunk), ...rest);
      if (chunk instanceof Uint8Array) {
        const text = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('utf8');
        const clean = redactKnown(text);
        if (clean !== text) return write(clean, ...rest);
      }
      return write(chunk, ...rest);
    }) as typeof stream.write;
  }
}

/** `--api-key <v>` / `--api-key=<v>` straight from argv: parse errors are rendered before flags exist. */
function registerArgvSecrets(argv: string[]): void {
  argv.forEach((a, i) => {
    if (a === '--api-key') registerSecret(argv[i + 1]);
    else if (a.startsWith('--api-key=')) registerSecret(a.slice('--api-key='.length));
  });
}

/** `--log-format json` straight from argv: a parse error is rendered as a JSON line too. */
function argvLogFormat(argv: string[]): string | undefined {
  const i = argv.lastIndexOf('--log-format');
  return i >= 0 ? argv[i + 1] : argv.findLast((a) => a.startsWith('--log-format='))?.slice('--log-format='.length);
}

/** oclif's argument/flag errors (missing argument, unknown flag, a flag's own parse error) as a usage error. */
class UsageError extends CareEtlError {
  constructor(err: unknown, command: string, flags: Record<string, { description?: string }>) {
    const raw = stripVTControlCharacters(err instanceof Error ? err.message : String(err));
    const message = uniformFlagMessage(raw.replace(/\n?See more help with --help\s*$/, '').replace(/ \n\t/g, ': '));
    const rule = declaredRule(message, flags) ?? flagSuggestion(message, flags);
    super(message, { exitCode: ExitCode.config, hint: `${rule ? `${rule} ` : ''}See \`${command} --help\`.` });
    this.name = 'UsageError';
  }
}

/**
 * oclif's own flag-value messages in the wording of ours (number-flags.ts): "Expected `--x` to be …, got `y`" —
 * "Parsing --concurrency: Expected an integer greater than or equal to 1 but received: 0" and
 * "Expected --progress=sometimes to be one of: auto, bar" read as every other flag's.
 */
export function uniformFlagMessage(message: string): string {
  const parsing = /^Parsing --([\w-]+): ([\s\S]*)$/.exec(message);
  if (parsing) {
    const [, name, rest] = parsing as unknown as [string, string, string];
    if (rest.startsWith(`Expected \`--${name}\``)) return rest;
    const oclif = /^Expected (.+?) but received: ([\s\S]*)$/.exec(rest);
    if (oclif) {
      const expected = oclif[1]!.replace(/ greater than or equal to /, ' ≥ ').replace(/ less than or equal to /, ' ≤ ');
      return `Expected \`--${name}\` to be ${expected}, got \`${oclif[2]}\``;
    }
    return message;
  }
  const options = /^Expected --([\w-]+)=([\s\S]*) to be one of: (.+)$/.exec(message);
  if (options) return `Expected \`--${options[1]}\` to be one of ${options[3]}, got \`${options[2]}\``;
  return message;
}

/** A refused combination names the flag declaring it ("… when using --bom"): that flag's description says the rule. */
function declaredRule(message: string, flags: Record<string, { description?: string }>): string | undefined {
  const name = /when using --([\w-]+)/.exec(message)?.[1];
  const description = name ? flags[name]?.description : undefined;
  return description ? `--${name}: ${description.replace(/\.$/, '')}.` : undefined;
}

/** "Nonexistent flag(s): --dryrun" → "Did you mean --dry-run?" for each unknown flag close to a declared one. */
function flagSuggestion(message: string, flags: Record<string, unknown>): string | undefined {
  const unknown = /^Nonexistent flags?: (.+)$/m.exec(message)?.[1]?.split(', ') ?? [];
  const names = [...Object.keys(flags), 'help'];
  const near = unknown.flatMap((u) => {
    const name = /^--([^=]+)/.exec(u)?.[1];
    const match = name ? closest(name, names) : undefined;
    return match ? [`--${match}`] : [];
  });
  return near.length ? `Did you mean ${near.join(', ')}?` : undefined;
}

/** A cancelled command that has not ended this long after the first signal ends anyway (CI sends SIGKILL ~10 s after SIGINT). */
const CANCEL_GRACE_MS = 4000;

/**
 * Ends the process by the signal itself, as if no handler were installed: a shell then reports 130 (SIGINT) or 143
 * (SIGTERM). Not `process.exit`: its teardown joins the I/O threads, and one blocked for good (opening a FIFO
 * nobody writes) would hold the process forever.
 */
function dieBy(sig: NodeJS.Signals): never {
  // The live display hides the cursor and restores it when it stops; ending by the signal skips that.
  if (process.stderr.isTTY) process.stderr.write('\x1b[?25h');
  process.removeAllListeners('SIGINT');
  process.removeAllListeners('SIGTERM');
  process.kill(process.pid, sig);
  process.exit(128 + (sig === 'SIGTERM' ? 15 : 2)); // only if the signal is ignored
}

/** The grace bound: an unref'd timer, so a cancel that ends in time is never held up by it. */
function endAfterGrace(sig: NodeJS.Signals): void {
  setTimeout(() => {
    process.stderr.write(
      `${sig}: not stopped within ${CANCEL_GRACE_MS / 1000} s (bookkeeping or a file still busy); ending now — creates whose outcome is unknown stay pending, the next run reconciles them\n`,
    );
    dieBy(sig);
  }, CANCEL_GRACE_MS).unref();
}

export abstract class CareCommand<T> extends Command {
  static override enableJsonFlag = true;
  static override baseFlags = { verbose: flag.verbose(), quiet: flag.quiet(), dotenv: flag.dotenv(), 'log-format': flag['log-format']() };

  protected logLevel: LogLevel = 'normal';
  /** `--log-format json`: stderr as JSON lines (src/cli/json-log.ts); undefined for text. */
  protected jsonLog?: JsonLog;
  #nodeWarnings = false;
  /** Aborted on the first SIGINT/SIGTERM: the library stops reading, finishes its bookkeeping and returns. */
  protected readonly abort = new AbortController();
  #signals?: () => void;

  protected get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** The stderr line of a first SIGINT/SIGTERM (a command that writes no rejects, reports or history says what it does instead). */
  protected cancelNotice(sig: NodeJS.Signals): string {
    return `${sig}: cancelling — waits and requests in flight are abandoned, then the rejects file, report and run history are written (${sig === 'SIGINT' ? 'Ctrl+C' : sig} again to quit at once)`;
  }

  abstract override run(): Promise<T>;

  override async init(): Promise<void> {
    // Every source stream and request in flight listens to the one cancel signal (each removes its listener when it
    // ends): more than Node's default 10 at once is the design, not a leak — no warning on stderr.
    setMaxListeners(0, this.abort.signal);
    registerArgvSecrets(this.argv);
    this.setLogFormat(argvLogFormat(this.argv));
    registerSecret(process.env.CARE_API_KEY);
    registerProxySecrets(process.env);
    redactProcessOutput();
    await super.init();
    const onSignal = (sig: NodeJS.Signals) => {
      if (this.abort.signal.aborted) {
        process.stderr.write(`${sig} again: exiting without bookkeeping (creates whose outcome is unknown stay pending: the next run reconciles them)\n`);
        dieBy(sig);
      }
      if (this.jsonLog) this.jsonLog.write('warn', 'cancel', { signal: sig });
      else if (!this.jsonEnabled()) process.stderr.write(`${this.cancelNotice(sig)}\n`);
      // An AbortError: every layer already tells "the caller asked to stop" by that name.
      this.abort.abort(new DOMException(`cancelled by ${sig}`, 'AbortError'));
      endAfterGrace(sig);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    this.#signals = () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    };
  }

  /** Parses, then applies `--dotenv` (or `.env` beside the mapping), secrets and the log level. */
  protected override async parse<F extends Out, B extends Out, A extends Out>(options?: Input<F, B, A>, argv?: string[]): Promise<ParserOutput<F, B, A>> {
    let out: ParserOutput<F, B, A>;
    try {
      out = await super.parse(options, argv);
    } catch (err) {
      // Never oclif's error object itself: under --json it would print the whole parsed config, secrets included.
      const declared = { ...this.ctor.baseFlags, ...(options ?? this.ctor).flags };
      throw new UsageError(err, `${this.config.bin} ${this.id?.replace(/:/g, ' ') ?? ''}`.trim(), declared);
    }
    const flags = out.flags as { verbose?: boolean; quiet?: boolean; dotenv?: string; 'api-key'?: string; 'log-format'?: string };
    const args = out.args as { mapping?: string };
    registerSecret(flags['api-key']);
    const { loadEnvFiles } = await import('./env-file.js');
    loadEnvFiles({ envFile: flags.dotenv, mappingFile: args.mapping });
    registerSecret(process.env.CARE_API_KEY);
    registerSecret(process.env.CARE_STATE_SECRET); // the key of the state's match digests (src/load/match-digest.ts)
    registerProxySecrets(process.env);
    this.logLevel = flags.quiet ? 'quiet' : flags.verbose ? 'verbose' : 'normal';
    this.setLogFormat(flags['log-format']);
    return out;
  }

  /** JSON lines at the log level's threshold (`--quiet`: errors and the verdict; `--verbose`: requests too). */
  private setLogFormat(format: string | undefined): void {
    const minLevel = this.logLevel === 'quiet' ? 'error' : this.logLevel === 'verbose' ? 'debug' : 'info';
    this.jsonLog = format === 'json' ? createJsonLog({ write: (l) => process.stderr.write(l), minLevel }) : undefined;
    // Node's own warnings would be a text line among the JSON ones: they become events.
    if (this.jsonLog && !this.#nodeWarnings) {
      this.#nodeWarnings = true;
      process.removeAllListeners('warning');
      process.on('warning', (w) => this.jsonLog?.write('warn', 'node-warning', { name: w.name, message: w.message }));
    }
  }

  /** `auto` → a bar on a TTY, plain lines otherwise, nothing under `--json` or `--quiet`. */
  protected progressMode(flag: string | undefined): ProgressMode {
    if (flag === 'none' || this.logLevel === 'quiet' || this.jsonLog) return 'none';
    if (flag === 'bar' || flag === 'lines') return flag;
    if (flag === 'tty') return 'bar';
    return this.jsonEnabled() ? 'none' : process.stderr.isTTY ? 'bar' : 'lines';
  }

  protected shell(progressFlag?: string): CommandShell {
    return {
      json: this.jsonEnabled(),
      progress: this.progressMode(progressFlag),
      signal: this.signal,
      onRequest: this.requestLog,
      log: (l) => this.log(l),
      notice: (l) => this.notice(l),
      fail: (e) => this.fail(e),
    };
  }

  /** Informational stderr line (not under `--json` or `--quiet`). */
  protected info(line: string): void {
    if (this.jsonLog) this.jsonLog.write('info', 'message', { message: line });
    else if (!this.jsonEnabled() && this.logLevel !== 'quiet') process.stderr.write(stderrLine(line));
  }

  /** A summary line that must never be silent: stdout with the summary, stderr under `--json` or `--quiet`. */
  notice(line: string | undefined): void {
    if (line === undefined) return;
    if (this.jsonLog && (this.jsonEnabled() || this.logLevel === 'quiet')) this.jsonLog.write('warn', 'notice', { message: line });
    else if (this.jsonEnabled() || this.logLevel === 'quiet') process.stderr.write(stderrLine(line));
    else this.log(line);
  }

  /** Summary on stdout (not under `--json` or `--quiet`). */
  override log(message = '', ...args: unknown[]): void {
    if (this.logLevel !== 'quiet') super.log(message, ...args);
  }

  /** `--verbose` request log: method, path, status, time — never headers or bodies. */
  protected get requestLog(): ((r: { method: string; path: string; status: number | 'error'; ms: number }) => void) | undefined {
    if (this.logLevel !== 'verbose') return undefined;
    if (this.jsonLog) return this.jsonLog.onRequest;
    return (r) => process.stderr.write(stderrLine(`[http] ${r.method} ${r.path} → ${r.status} ${Math.round(r.ms)} ms`));
  }

  /** Every error, ours or oclif's, becomes the same small envelope and a documented exit code. */
  override async catch(thrown: Error & { exitCode?: number }): Promise<void> {
    const body = this.fail(thrown);
    if (this.jsonEnabled()) this.logJson(body);
  }

  /** `--log-format json`: the error as one line (its issues by code and place), then the verdict. */
  private logErrorLine(body: ErrorJson): void {
    const { name, message, hint, issues } = body.error;
    const where = issues.map((i) => ({ code: i.code, message: i.message, path: i.path, location: i.location }));
    this.jsonLog?.write('error', 'error', { name, message, hint, issues: where, exitCode: body.exitCode });
  }

  override async finally(err: Error | undefined): Promise<void> {
    if (this.jsonLog && !this.jsonLog.verdictWritten) this.jsonLog.verdict({ command: this.id, exitCode: process.exitCode ?? 0 });
    this.#signals?.();
    await super.finally(err);
  }

  protected override toSuccessJson(result: unknown): unknown {
    const body =
      result && typeof result === 'object' && !Array.isArray(result)
        ? { ...result, exitCode: 'exitCode' in result ? result.exitCode : (process.exitCode ?? 0), formatVersion: JSON_FORMAT_VERSION }
        : result;
    return JSON.parse(redactKnown(JSON.stringify(body)));
  }

  override logJson(json: unknown): void {
    process.stdout.write(`${redactKnown(JSON.stringify(json, null, 2))}\n`);
  }

  /** Renders a failure (stderr, or the log line) and sets the exit code; the envelope is the `--json` result (`catch` prints it). */
  protected fail(thrown: unknown): ErrorJson {
    const err = this.cancelled(thrown);
    const body = this.toErrorEnvelope(err);
    this.logErrorLine(body);
    if (!this.jsonEnabled() && !this.jsonLog) process.stderr.write(`${redactKnown(this.renderError(err, body))}\n`);
    process.exitCode = body.exitCode;
    return body;
  }

  /** The cancel's own AbortError, escaped from a library: said as a cancel (exit 3), not as a bug. */
  private cancelled<E>(err: E): E | CareEtlError {
    if (!this.abort.signal.aborted || (err as { name?: unknown })?.name !== 'AbortError') return err;
    return new CareEtlError(`Cancelled (${String((err as { message?: unknown }).message).replace(/^cancelled by /, '')}) before the command finished`, {
      exitCode: ExitCode.incomplete,
      hint: 'Run it again: re-runs are safe.',
    });
  }

  private toErrorEnvelope(err: unknown): ErrorJson {
    if (err instanceof Errors.ExitError) {
      return {
        error: { name: 'Exit', message: `exited with ${err.oclif.exit}`, issues: [] },
        exitCode: err.oclif.exit ?? ExitCode.config,
        formatVersion: JSON_FORMAT_VERSION,
      };
    }
    if (err instanceof Errors.CLIError) {
      // `this.error(…)` and oclif's own failures: their exit code, our envelope.
      return {
        error: { name: 'Error', message: stripVTControlCharacters(err.message), issues: [] },
        exitCode: err.oclif?.exit ?? ExitCode.config,
        formatVersion: JSON_FORMAT_VERSION,
      };
    }
    return describeError(err).json;
  }

  private renderError(err: unknown, body: ErrorJson): string {
    if (err instanceof Errors.CLIError && !(err instanceof CareEtlError))
      return `Error: ${body.error.message}${body.error.hint ? `\nHint: ${body.error.hint}` : ''}`;
    const { text } = describeError(err);
    return this.logLevel === 'verbose' && err instanceof Error && err.stack && body.error.name !== 'CareEtlError' ? `${text}\n${err.stack}` : text;
  }
}
