/**
 * What the loader decides about a mapped resource's identity without the server, decided here once for the run
 * (`ResourceSync`, before any request) and the offline loops (`run --dry-run`, `validate --sample`), so a run
 * never rejects a row for a reason the offline loop could not see:
 * - the match value: the rule must give one text value (`match-invalid` otherwise: a JSONata `match:` giving two
 *   values, an object, or failing);
 * - source keys sharing a match value: not rejected — two keys are two resources, told apart on the server by
 *   content only — but counted, and the run warns (`MatchClaims`).
 */
import { issuesOf, type Issue } from '../core/issues.js';
import { MappingEvalError } from '../mapping/errors.js';
import type { Resource } from '../api/types.js';
import type { MatchRule } from './server-index.js';

export type IdentityDecision = { ok: true; matchValue: string } | { ok: false; issues: Issue[] };

/** `decideIdentity` without a promise, for a rule that needs no JSONata (`MatchRule.now`); else undefined. */
export function decideIdentityNow(rule: MatchRule, resource: Resource): IdentityDecision | undefined {
  return rule.now && { ok: true, matchValue: rule.now.ofMapped(resource) };
}

/** The resource's match value under its mapping's rule, or the reject the run makes of it. */
export async function decideIdentity(rule: MatchRule, resource: Resource): Promise<IdentityDecision> {
  try {
    return { ok: true, matchValue: await rule.ofMapped(resource) };
  } catch (err) {
    if (!(err instanceof MappingEvalError)) throw err;
    return { ok: false, issues: issuesOf(err) };
  }
}

/** Which source key first used each match value in one mapping, and how many keys share one. */
export class MatchClaims {
  readonly #first = new Map<string, string>();
  /** Match value → how many distinct keys use it (only values used by more than one). */
  readonly #sharing = new Map<string, number>();
  #shared = 0;

  /** Notes that `key` uses `matchValue`; returns the earlier key using it, if another one does. */
  claim(matchValue: string, key: string): string | undefined {
    const first = this.#first.get(matchValue);
    if (first === undefined) this.#first.set(matchValue, key);
    else if (first !== key) {
      this.#shared++;
      this.#sharing.set(matchValue, (this.#sharing.get(matchValue) ?? 1) + 1);
      return first;
    }
    return undefined;
  }

  /** Keys whose match value another key of the mapping also has. */
  get shared(): number {
    return this.#shared;
  }

  /** How many distinct keys use `matchValue` (1 when only one, or none, does). */
  sharing(matchValue: string): number {
    return this.#sharing.get(matchValue) ?? 1;
  }
}
