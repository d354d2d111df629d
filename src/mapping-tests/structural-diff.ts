/**
 * Structural comparison of an expected and a produced resource, as a list of differences with their JSON
 * pointer. `subset`: only the fields given in `expected` are compared (recursively); arrays are compared
 * element by element and must have the same length (like vitest's `toMatchObject`).
 */
import type { DiffEntry } from './types.js';
import { isObj } from '../core/is-object.js';

export interface DiffOptions {
  subset?: boolean;
  /** Stop after this many entries (default 50). */
  max?: number;
}

const seg = (s: string | number) => String(s).replace(/~/g, '~0').replace(/\//g, '~1');

export function structuralDiff(expected: unknown, got: unknown, opts: DiffOptions = {}): DiffEntry[] {
  const out: DiffEntry[] = [];
  const max = opts.max ?? 50;
  const subset = opts.subset ?? false;

  const walk = (exp: unknown, act: unknown, path: string): void => {
    if (out.length >= max) return;
    if (Array.isArray(exp) && Array.isArray(act)) {
      const n = Math.max(exp.length, act.length);
      for (let i = 0; i < n && out.length < max; i++) {
        const p = `${path}/${i}`;
        if (i >= act.length) out.push({ path: p, kind: 'missing', expected: exp[i] });
        else if (i >= exp.length) out.push({ path: p, kind: 'unexpected', got: act[i] });
        else walk(exp[i], act[i], p);
      }
      return;
    }
    if (isObj(exp) && isObj(act)) {
      for (const k of Object.keys(exp)) {
        if (out.length >= max) return;
        const p = `${path}/${seg(k)}`;
        if (!Object.prototype.hasOwnProperty.call(act, k) || act[k] === undefined) {
          if (exp[k] !== undefined) out.push({ path: p, kind: 'missing', expected: exp[k] });
        } else walk(exp[k], act[k], p);
      }
      if (!subset) {
        for (const k of Object.keys(act)) {
          if (out.length >= max) return;
          if (!Object.prototype.hasOwnProperty.call(exp, k) && act[k] !== undefined) out.push({ path: `${path}/${seg(k)}`, kind: 'unexpected', got: act[k] });
        }
      }
      return;
    }
    if (Object.is(exp, act)) return;
    const entry: DiffEntry = { path: path || '/', kind: 'changed', expected: exp, got: act };
    if (typeof exp === 'number' && typeof act === 'string' && act.trim() !== '' && Number(act) === exp) {
      entry.note = 'the expected value is a number, the produced one is text: quote it in the test file';
    } else if (typeof exp === 'string' && typeof act === 'number' && String(act) === exp) {
      entry.note = 'the produced value is a number, the expected one is text';
    }
    out.push(entry);
  };

  walk(expected, got, '');
  return out;
}

/** True when `got` has every field of `expected` (subset) / equals it (exact). */
export function matches(expected: unknown, got: unknown, subset = false): boolean {
  return structuralDiff(expected, got, { subset, max: 1 }).length === 0;
}

/** One-line JSON of a value for reports, truncated. */
export function showValue(v: unknown, max = 80): string {
  if (v === undefined) return '(nothing)';
  const s = JSON.stringify(v) ?? String(v);
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/** `  /name/0/given/0: expected "Ann", got "ANN"` lines. */
export function formatDiff(entries: DiffEntry[]): string[] {
  return entries.map((d) => {
    const where = d.path || '/';
    switch (d.kind) {
      case 'missing':
        return `${where}: missing — expected ${showValue(d.expected)}`;
      case 'unexpected':
        return `${where}: unexpected — got ${showValue(d.got)}`;
      default:
        return `${where}: expected ${showValue(d.expected)}, got ${showValue(d.got)}${d.note ? ` (${d.note})` : ''}`;
    }
  });
}
