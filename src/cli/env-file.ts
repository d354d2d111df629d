/**
 * `.env` files: `KEY=value` lines (the dotenv format Node reads with `--env-file`) applied to the environment
 * before the mapping is loaded, so `CARE_*` settings and `${VAR}` references in a mapping can live beside it.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseEnv } from 'node:util';
import { CareEtlError, ExitCode, issue } from '../core/issues.js';

export interface LoadEnvFilesOptions {
  /** `--dotenv` (alias `--env-file`): must exist. When given, the `.env` beside the mapping is not read. */
  envFile?: string;
  /** The mapping file: its folder's `.env` is read when it exists (and no `envFile` is given). */
  mappingFile?: string;
  /** Where the variables go (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /** Base of relative paths (default `process.cwd()`). */
  cwd?: string;
}

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
        hint: '`--dotenv` names a file of KEY=value lines; without it, a `.env` file beside the mapping is read if there is one.',
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
  const bad = firstBadLine(text);
  if (bad) {
    throw new CareEtlError(`The env file ${file} has a line that is not KEY=value`, {
      issues: [issue.error('env-syntax', bad.reason, { location: { file, line: bad.line } })],
      hint: 'Each line is `KEY=value`, a `# comment` or blank; a quoted value ends with the same quote (it may span lines).',
      exitCode: ExitCode.config,
    });
  }
  const vars: Record<string, string> = {};
  for (const [key, value] of Object.entries(parseEnv(text))) if (value !== undefined) vars[key] = value;
  return vars;
}

const ASSIGNMENT = /^(?:export\s+)?[A-Za-z_][A-Za-z0-9_.-]*\s*=\s*(.*)$/;
const QUOTES = new Set(['"', "'", '`']);

/**
 * The first line `util.parseEnv` would drop or misread (it silently skips a line without `=` and an unclosed quote),
 * with why — never the line's text. Quotes are read as parseEnv reads them: the value ends at the next same quote
 * (no escapes), possibly lines later.
 */
function firstBadLine(text: string): { line: number; reason: string } | undefined {
  const nul = text.indexOf('\0');
  if (nul >= 0) return { line: lineAt(text, nul), reason: 'a NUL byte: this is not a text file of KEY=value lines' };
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.replace(/\r$/, '').trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = ASSIGNMENT.exec(line);
    if (!m) return { line: i + 1, reason: 'expected KEY=value (KEY: letters, digits, `_`, `.`, `-`; not starting with a digit)' };
    const value = m[1]!;
    const quote = value[0];
    if (!quote || !QUOTES.has(quote)) continue;
    let rest = value.slice(1);
    let end = i;
    while (!rest.includes(quote) && end + 1 < lines.length) rest = lines[++end]!.replace(/\r$/, '');
    if (!rest.includes(quote)) return { line: i + 1, reason: `the value opens a ${quote} quote that is never closed` };
    const after = rest.slice(rest.indexOf(quote) + 1).trim();
    if (after !== '' && !after.startsWith('#')) {
      const where = end === i ? '' : ` (the quote opened here closes on line ${end + 1})`;
      return { line: i + 1, reason: `text after the closing ${quote} quote${where}: only a # comment may follow` };
    }
    i = end;
  }
  return undefined;
}

function lineAt(text: string, index: number): number {
  let line = 1;
  for (let i = text.indexOf('\n'); i >= 0 && i < index; i = text.indexOf('\n', i + 1)) line++;
  return line;
}

function applyEnv(vars: Record<string, string>, env: NodeJS.ProcessEnv): void {
  for (const [key, value] of Object.entries(vars)) {
    if (!Object.prototype.hasOwnProperty.call(env, key)) env[key] = value;
  }
}
