import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { CareEtlError, type Issue } from '../../src/core/issues.js';
import { MappingEvalError } from '../../src/mapping/errors.js';

export const FIXTURES = fileURLToPath(new URL('../fixtures/mapping/', import.meta.url));
export const fixture = (name: string) => `${FIXTURES}${name}`;

/** 1-based line and column of the n-th occurrence of `needle` in a fixture (to cross-check positions). */
export function positionIn(name: string, needle: string, nth = 0): { line: number; column: number } {
  const text = readFileSync(fixture(name), 'utf8');
  let at = -1;
  for (let i = 0; i <= nth; i++) {
    at = text.indexOf(needle, at + 1);
    if (at < 0) throw new Error(`${needle} not found in ${name}`);
  }
  const before = text.slice(0, at);
  const line = before.split('\n').length;
  return { line, column: at - before.lastIndexOf('\n') };
}

/** Runs `f`, expects a CareEtlError, returns its issues. */
export async function issuesOf(f: () => unknown): Promise<{ error: CareEtlError; issues: Issue[] }> {
  try {
    await f();
  } catch (err) {
    expect(err).toBeInstanceOf(CareEtlError);
    return { error: err as CareEtlError, issues: (err as CareEtlError).issues };
  }
  throw new Error('expected a CareEtlError');
}

export function issueWith(issues: Issue[], code: string, text?: string): Issue {
  const found = issues.find((i) => i.code === code && (text === undefined || i.message.includes(text) || i.path?.includes(text)));
  if (!found) throw new Error(`no issue ${code}${text ? ` (${text})` : ''} in:\n${issues.map((i) => `${i.code}: ${i.message}`).join('\n')}`);
  return found;
}

/** Awaits `p`, expects a MappingEvalError (a row-level failure), returns it. */
export async function evalError(p: Promise<unknown>): Promise<MappingEvalError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(MappingEvalError);
    return err as MappingEvalError;
  }
  throw new Error('expected a MappingEvalError');
}
