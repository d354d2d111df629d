/**
 * Mapping problems as the editor shows them: every `Issue` of loading, compiling and the column contract becomes a
 * `Diag` at its line and column of the editor's text (the loader's YAML positions), its end at the end of the word
 * it points at — a column name, a function, a key — so the editor can underline it.
 */
import { CareEtlError, issuesOf, type Issue } from '../core/issues.js';
import type { Diag } from './types.js';

const WORD = /^[$A-Za-z_][\w$]*/;

/** The issues of a thrown error (a `CareEtlError`'s hint on each), as diagnostics in `text`. */
export function diagsOfError(err: unknown, text: string): Diag[] {
  const hint = err instanceof CareEtlError ? err.hint : undefined;
  return diagsOf(issuesOf(err), text, hint);
}

export function diagsOf(issues: readonly Issue[], text: string, hint?: string): Diag[] {
  const lines = text.split('\n');
  return issues.map((i) => {
    const line = Math.max(1, i.location?.line ?? 1);
    const column = Math.max(1, i.location?.column ?? 1);
    const d: Diag = { severity: i.severity === 'warning' ? 'warning' : 'error', message: i.message, code: i.code, line, column };
    if (hint) d.hint = hint;
    if (i.path) d.field = i.path;
    const word = WORD.exec((lines[line - 1] ?? '').slice(column - 1))?.[0];
    if (word) {
      d.endLine = line;
      d.endColumn = column + word.length;
    }
    return d;
  });
}

/** File order: line, then column. */
export function sortDiags(diags: Diag[]): Diag[] {
  return diags.sort((a, b) => a.line - b.line || a.column - b.column);
}
