import { readFile } from 'node:fs/promises';
import { CareEtlError, ExitCode, issue } from './issues.js';

/**
 * Reads a small UTF-8 configuration file (mapping, mapping test, columns file: see `readYamlConfig`) whole,
 * without a BOM. An unreadable file is a configuration error (exit 2) naming the file and why:
 * `cannot read <what> <file> (file not found)`.
 */
export async function readTextFile(path: string, file: string, what: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const message = `cannot read ${what} ${file}${code === 'ENOENT' ? ' (file not found)' : code ? ` (${code})` : ''}`;
    throw new CareEtlError(message, { issues: [issue.fileUnreadable(file, message)], exitCode: ExitCode.config, cause: err });
  }
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}
