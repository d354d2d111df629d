/**
 * `--view FILE`: the ViewDefinition read and compiled before the target is opened, so a view that cannot be used
 * stops the export with nothing fetched (exit 2). JSON syntax errors are named at their line:col.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { CareEtlError, ExitCode, issue } from '../../core/issues.js';
import { compileView, type CompiledView } from './view-definition.js';

export interface LoadedView {
  /** The path as given (messages name it so). */
  file: string;
  view: CompiledView;
}

/** 1-based line and column of a character offset. */
function lineCol(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  return { line, column: offset - before.lastIndexOf('\n') };
}

export function loadView(file: string, resource = 'Observation'): LoadedView {
  let text: string;
  try {
    text = readFileSync(resolve(file), 'utf8');
    // Windows editors save JSON with a BOM; JSON.parse refuses it.
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new CareEtlError(`Cannot read the ViewDefinition ${file}${code ? ` (${code})` : ''}`, {
      issues: [issue.fileUnreadable(file, 'the file cannot be read')],
      exitCode: ExitCode.config,
      cause: err,
    });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    // Node names the offset (`… in JSON at position 42`): turned into the line:col an editor jumps to.
    const message = (err as Error).message;
    const at = /position (\d+)/.exec(message);
    const where = at ? lineCol(text, Number(at[1])) : {};
    throw new CareEtlError(`The ViewDefinition ${file} is not valid JSON`, {
      issues: [issue.error('view-invalid', message, { location: { file, ...where } })],
      exitCode: ExitCode.config,
      hint: 'A ViewDefinition is a JSON document (SQL-on-FHIR v2).',
    });
  }
  return { file, view: compileView(json, file, { resource }) };
}
