/**
 * The guard against mass ending by accident (`onMissing: end`): before a run ends or deactivates the resources
 * whose keys are gone from the export, it compares how many it would end with how many the mapping has loaded.
 * Above the allowance it ends nothing for that mapping — a truncated or empty nightly file must never end every
 * care team (rsync `--max-delete`, Azure AD Connect's "prevent accidental deletes"). One pure decision, used by
 * `run` and `plan` alike.
 */
import type { WritableType } from '../schemas/resource-types.js';

/** How many a run may end per mapping: a count, or a share of the mapping's loaded resources. */
export type EndingAllowance = { count: number } | { percent: number };

/** Where the allowance came from: `--allow-ending`, the mapping's `allowEnding:`, or the schema's default. */
export type AllowanceSource = 'flag' | 'mapping' | 'default';

export interface EndingInput {
  /** Resources of the mapping a run would end now (loaded, not ended, key gone from the export). */
  wouldEnd: number;
  /** Resources of the mapping the state holds as loaded and not ended, when the run starts the mapping. */
  loaded: number;
  /** Data rows read from the mapping's source (rejected ones included). */
  rowsRead: number;
  allow: EndingAllowance;
  from: AllowanceSource;
}

export interface EndingDecision {
  allowed: boolean;
  /** `above-limit`: more than the allowance; `empty-source`: the source had no data row at all. */
  reason?: 'above-limit' | 'empty-source';
  /** The most this run may end for the mapping (a count). */
  limit: number;
}

/** "N" (a count ≥ 0) or "P%" (0–100, decimals allowed); undefined when it is neither. */
export function parseAllowance(input: string | number): EndingAllowance | undefined {
  if (typeof input === 'number') return Number.isSafeInteger(input) && input >= 0 ? { count: input } : undefined;
  const s = input.trim();
  if (/^\d+$/.test(s)) {
    const n = Number(s);
    return Number.isSafeInteger(n) ? { count: n } : undefined;
  }
  const m = /^(\d+(?:\.\d+)?)\s*%$/.exec(s);
  if (!m) return undefined;
  const p = Number(m[1]);
  return p <= 100 ? { percent: p } : undefined;
}

/** The p-queue-style message for a bad `--allow-ending` (or `allowEnding:`) value. */
export function allowanceError(name: string, input: unknown): string {
  return `Expected \`${name}\` to be a count ≥ 0 or a percentage like 25%, got \`${String(input)}\``;
}

export function formatAllowance(a: EndingAllowance): string {
  return 'count' in a ? String(a.count) : `${a.percent}%`;
}

/** An allowance that covers every loaded resource: the only one that lets an empty source end anything. */
function coversAll(a: EndingAllowance, wouldEnd: number): boolean {
  return 'count' in a ? a.count >= wouldEnd : a.percent >= 100;
}

/**
 * Decides whether the run may end `wouldEnd` resources of one mapping. A percentage is of the loaded resources,
 * rounded up (10 % of 5 is 1: a small clinic can always end one per run); a count is absolute. A source with no
 * data row (empty, header only, unreadable as rows) never counts as "every row vanished": it ends nothing unless
 * `--allow-ending` itself covers them all (`100%`) — a standing `allowEnding:` in the mapping does not.
 */
export function decideEnding(x: EndingInput): EndingDecision {
  const base = Math.max(x.loaded, x.wouldEnd);
  const limit = 'count' in x.allow ? x.allow.count : Math.ceil(Number(((x.allow.percent * base) / 100).toFixed(9)));
  if (x.wouldEnd === 0) return { allowed: true, limit };
  if (x.rowsRead === 0 && !(x.from === 'flag' && coversAll(x.allow, x.wouldEnd))) return { allowed: false, reason: 'empty-source', limit };
  if (x.wouldEnd > limit) return { allowed: false, reason: 'above-limit', limit };
  return { allowed: true, limit };
}

/** What the report, `--json` and the plan say about one mapping's ending (see `decideEnding`). */
export interface EndingGuardReport {
  wouldEnd: number;
  loaded: number;
  rowsRead: number;
  /** The allowance as given (`10%`, `5`) and where it came from. */
  allowance: string;
  from: AllowanceSource;
  limit: number;
  allowed: boolean;
  reason?: EndingDecision['reason'];
  /** Care team participants ended inside their team's update during the rows (not held back by the guard). */
  membersEnded?: number;
  message?: string;
}

const NOUNS: Record<WritableType, [string, string]> = {
  CareTeam: ['care team', 'care teams'],
  Patient: ['patient', 'patients'],
  Practitioner: ['practitioner', 'practitioners'],
};

const pct = (n: number, of: number) => (of > 0 ? `${Math.round((100 * n) / of)} %` : '100 %');

/** The guard's verdict in words (never a key or a cell: counts and the setting only). */
export function describeEnding(mapping: string, type: WritableType, x: EndingInput, d: EndingDecision): string {
  const [, many] = NOUNS[type];
  const verb = type === 'CareTeam' ? 'end' : 'deactivate';
  const of = Math.max(x.loaded, x.wouldEnd);
  const head = `${mapping}: would ${verb} ${x.wouldEnd} of ${of} ${many} (${pct(x.wouldEnd, of)})`;
  const where = x.from === 'flag' ? '--allow-ending' : x.from === 'mapping' ? 'allowEnding: of the mapping' : 'the default';
  const setting = `${formatAllowance(x.allow)} (${'percent' in x.allow ? `${d.limit}; ` : ''}${where})`;
  if (d.allowed) return `${head}, within the limit of ${setting}`;
  if (d.reason === 'empty-source') {
    return `${head}, but its source has no data rows (empty, header only or unreadable) — nothing ended; an empty export never counts as every row gone. If the clinic really closed all of them, re-run with --allow-ending 100%`;
  }
  return `${head}, above the limit of ${setting} — nothing ended; if the clinic really closed these, re-run with --allow-ending ${x.wouldEnd} (or 100%)`;
}
