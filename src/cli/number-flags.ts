import { Flags } from '@oclif/core';
import { allowanceError, parseAllowance } from '../load/ending-guard.js';

/**
 * Numeric flags whose errors say what was expected and what was given, p-queue style:
 * "Expected `--max-in-flight` to be an integer ≥ 1, got `x`" (exit 2 through CareCommand's usage errors).
 * Each returns a definition (src/cli/flags.ts names it once; a command calls it, or derives a variant).
 */
function numberFlag(name: string, description: string, expected: string, ok: (n: number, input: string) => boolean) {
  return Flags.custom<number>({
    description,
    parse: async (input) => {
      const n = Number(input);
      if (input.trim() === '' || !ok(n, input)) throw new Error(`Expected \`--${name}\` to be ${expected}, got \`${input}\``);
      return n;
    },
  });
}

/** An integer ≥ 1 (digits only: `1e3`, `0x10`, `2.0` are refused). */
export const positiveIntFlag = (name: string, description: string) =>
  numberFlag(name, description, 'an integer ≥ 1', (n, input) => /^\d+$/.test(input.trim()) && Number.isSafeInteger(n) && n >= 1);

/** A finite number ≥ 0. */
export const nonNegativeFlag = (name: string, description: string) => numberFlag(name, description, 'a number ≥ 0', (n) => Number.isFinite(n) && n >= 0);

/** A share between 0 and 1. */
export const rateFlag = (name: string, description: string) =>
  numberFlag(name, description, 'a number between 0 and 1', (n) => Number.isFinite(n) && n >= 0 && n <= 1);

/** `--allow-ending N|P%`: kept as given (a count or a percentage); the pipeline parses it with the mapping's setting. */
export const allowEndingFlag = (description: string) =>
  Flags.custom<string>({
    description,
    parse: async (input) => {
      if (!parseAllowance(input)) throw new Error(allowanceError('--allow-ending', input));
      return input.trim();
    },
  });

const DURATION_UNITS_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
/** Longer delays overflow Node's timers (they would fire at once). */
const MAX_DURATION_MS = 2_147_483_647;

/** A duration in ms from `90`, `90s`, `2m`, `1h`, `500ms` (a bare number is seconds); `examples` goes in the message. */
export const durationFlag = (name: string, description: string, examples: string, extra: { helpGroup?: string } = {}) =>
  Flags.custom<number>({
    description,
    ...extra,
    parse: async (input) => {
      const m = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h)?$/.exec(input.trim());
      if (!m) throw new Error(`Expected \`--${name}\` to be a duration ${examples}, got \`${input}\``);
      const ms = Number(m[1]) * DURATION_UNITS_MS[(m[2] ?? 's') as keyof typeof DURATION_UNITS_MS];
      if (ms > MAX_DURATION_MS) throw new Error(`Expected \`--${name}\` to be at most 596h, got \`${input}\``);
      return Math.round(ms);
    },
  });
