/**
 * `.env` files: `KEY=value` lines (the dotenv format Node reads with `--env-file`) applied to the environment
 * before the mapping is loaded, so `CARE_*` settings and `${VAR}` references in a mapping can live beside it.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseEnv } from 'node:util';
import { CareEtlError, ExitCode, issue } from '../core/issues.js';

export interface LoadEnvFilesOptions {
  /** `--env-file`: must exist. When given, the `.env` beside the mapping is not read. */
  envFile?: string;
  /** The mapping file: its folder's `.env` is read when it exists (and no `envFile` is given). */
  mappingFile?: string;
  /** Where the variables go (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /** Base of relative paths (default `process.cwd()`). */
  cwd?: string;
}

const KEY = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

/**
 * Applies `opts.envFile` if given (an error, exit code 2, if it cannot be read), else the `.env` beside
 * `opts.mappingFile` if there is one. Variables already set in the environment — even to an empty string —
 * win: a file never overrides them. Values are taken literally (`util.parseEnv`: quotes, `#` comments,
 * `export ` prefixes and multi-line double-quoted values are understood; `${VAR}` is not expanded).
 * Returns the files applied (as named: the `envFile` argument, or `<mapping folder>/.env`), in order.
 */
export function loadEnvFiles(opts: LoadEnvFilesOptions): string[] {
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  let file: string | undefined;
  if (opts.envFile !== undefined) {
    file = opts.envFile;
    if (!existsSync(resolve(cwd, file))) {
      throw new CareEtlError(`The env file ${file} does not exist`, {
        issues: [issue.fileUnreadable(file, `${file}: no such file`)],
        hint: '`--env-file` names a file of KEY=value lines; without it, a `.env` file beside the mapping is read if there is one.',
        exitCode: ExitCode.config,
      });
    }
  } else if (opts.mappingFile) {
    const beside = join(dirname(opts.mappingFile), '.env');
    if (isFile(resolve(cwd, beside))) file = beside;
  }
  if (file === undefined) return [];
  applyEnv(readEnvFile(file, cwd), env);
  return [file];
}

function isFile(p: string): boolean {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

/** The variables of one file; a line that is not `KEY=value` is an error naming its line (never its text: it may hold a secret). */
function readEnvFile(file: string, cwd: string): Record<string, string> {
  let text: string;
  try {
    text = readFileSync(resolve(cwd, file), 'utf8');
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === 'EISDIR' ? 'is a folder' : `cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`;
    throw new CareEtlError(`The env file ${file} ${reason}`, {
      issues: [issue.fileUnreadable(file, `${file}: ${reason}`)],
      exitCode: ExitCode.config,
    });
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  const parsed = parseEnv(text);
  const vars: Record<string, string> = {};
  for (const [key, value] of Object.entries(parsed)) {
    if (!KEY.test(key)) {
      // parseEnv glues a line without `=` to the next one: find where the bad key starts.
      const first = key.split(/\r?\n/)[0]!;
      const at = text.indexOf(first);
      const line = at < 0 ? undefined : text.slice(0, at).split('\n').length;
      throw new CareEtlError(`The env file ${file} has a line that is not KEY=value`, {
        issues: [
          issue.error('env-syntax', 'expected KEY=value (KEY: letters, digits, `_`, `.`, `-`; not starting with a digit)', { location: { file, line } }),
        ],
        exitCode: ExitCode.config,
      });
    }
    if (value !== undefined) vars[key] = value;
  }
  return vars;
}

function applyEnv(vars: Record<string, string>, env: NodeJS.ProcessEnv): void {
  for (const [key, value] of Object.entries(vars)) {
    if (!Object.prototype.hasOwnProperty.call(env, key)) env[key] = value;
  }
}
