/**
 * The check a run makes at the end of a phase that created resources without a shared state (issue 24, item 3):
 * another writer with its own state (a second CI job, a retried task, a laptop) lists the same empty tenant and
 * creates the same keys. One more listing of the type finds what this run's own listing could not see yet:
 * - a key this run created whose match value designates another server copy no key of this state holds → a
 *   duplicate, named with both ids (`duplicate-on-server`);
 * - a key created with an id the listing lacks → the create's answer named an id the server does not have
 *   (`created-id-missing`): the entry goes back to pending and the next run reconciles it by its match rule.
 * `checkCreated` is the pure decision; `CreatedKeys` collects what it needs while the phase runs.
 */
import type { Resource } from '../api/types.js';
import { issue, type Issue } from '../core/issues.js';
import type { Origin } from '../sources/types.js';
import type { MatchRule } from './server-index.js';

/** `--verify-after-load`: `auto` checks when the phase created something and no shared state holds the lease. */
export const VERIFY_POLICIES = ['auto', 'always', 'never'] as const;
export type VerifyPolicy = (typeof VERIFY_POLICIES)[number];

/** The hint of every finding: what makes a second writer impossible. */
export const SECOND_WRITER_HINT = 'use a shared state (--state postgres://…) or a CI concurrency group so one runner writes a tenant at a time';

/** One key this run created, as the check needs it. */
export interface CreatedKey {
  key: string;
  serverId: string;
  matchValue: string;
  /** Where its row is (for the reject), never its content. */
  origin: Origin;
  lines?: number[];
}

/** What the check knows of the fresh listing and of the state. */
export interface CheckView {
  /** The listing holds this id. */
  listed(id: string): boolean;
  /** Ids the listing holds under this match value (of this mapping). */
  copies(matchValue: string): readonly string[];
  /** The state records this id for a key (of any mapping of the type). */
  recorded(id: string): boolean;
}

export type Finding =
  | { kind: 'duplicate'; created: CreatedKey; others: string[] }
  /** `copies`: listed resources matching the key that no key of the state holds (the next run adopts one). */
  | { kind: 'missing'; created: CreatedKey; copies: string[] };

/**
 * Every created key with another unrecorded copy on the server, or whose id the listing lacks. A copy the state
 * records for another key is that key's resource (two keys may share a match value), never a duplicate.
 */
export function checkCreated(created: readonly CreatedKey[], view: CheckView): Finding[] {
  const findings: Finding[] = [];
  for (const c of created) {
    const unrecorded = view.copies(c.matchValue).filter((id) => id !== c.serverId && !view.recorded(id));
    if (!view.listed(c.serverId)) findings.push({ kind: 'missing', created: c, copies: unrecorded });
    else if (unrecorded.length) findings.push({ kind: 'duplicate', created: c, others: unrecorded });
  }
  return findings;
}

/** Whether the phase lists its type again: never with `never`, or when it created nothing; `auto` trusts a shared state's lease. */
export function shouldVerify(policy: VerifyPolicy, created: number, sharedState: boolean): boolean {
  if (policy === 'never' || created === 0) return false;
  return policy === 'always' || !sharedState;
}

/** The issue of a finding, in the words the rejects summary and the terminal show (ids and keys, never a cell). */
export function findingIssue(type: string, f: Finding): Issue {
  const own = `${type}/${f.created.serverId}`;
  if (f.kind === 'duplicate') {
    const others = f.others.map((id) => `${type}/${id}`).join(', ');
    return issue.error(
      'duplicate-on-server',
      `another writer created this key too: this run created ${own}, the server also holds ${others} with the same match value and no state records it; merge or retire the extra copy on the server — ${SECOND_WRITER_HINT}`,
    );
  }
  const found = f.copies.length ? `; the server holds ${f.copies.map((id) => `${type}/${id}`).join(', ')} matching it` : '';
  return issue.error(
    'created-id-missing',
    `the server answered the create with ${own}, which its listing does not hold${found}; the key is left pending, the next run reconciles it by its match rule (it is not created again in this run)`,
  );
}

/** The keys a phase created, with their match values (computed as the loader computed them). */
export class CreatedKeys {
  readonly keys: CreatedKey[] = [];
  /** Created keys whose match value could not be computed again (never expected: the loader computed it). */
  unchecked = 0;

  constructor(readonly rule: MatchRule) {}

  /** A promise only when the rule is a JSONata `match:` (`MatchRule.now`). */
  add(item: { key: string; resource: Resource; origin: Origin; lines?: number[] }, serverId: string): Promise<void> | void {
    const now = this.rule.now;
    if (now) {
      try {
        this.keys.push({ key: item.key, serverId, matchValue: now.ofMapped(item.resource), origin: item.origin, lines: item.lines });
      } catch {
        this.unchecked++;
      }
      return;
    }
    return this.#addLater(item, serverId);
  }

  async #addLater(item: { key: string; resource: Resource; origin: Origin; lines?: number[] }, serverId: string): Promise<void> {
    try {
      this.keys.push({ key: item.key, serverId, matchValue: await this.rule.ofMapped(item.resource), origin: item.origin, lines: item.lines });
    } catch {
      this.unchecked++;
    }
  }
}
