/**
 * The one decision about a mapped resource: create, adopt, update, unchanged, defer or reject — from the ledger's
 * entry, what the server holds and the mapped resource, under the reconcile policy. Pure: no I/O. `ResourceSync`
 * carries it out (run), describes it (`plan`) and tallies it (`state check`); only the carrying out differs.
 */
import type { Resource } from '../api/types.js';
import type { Issue } from '../core/issues.js';
import type { ReconcilePolicy } from '../mapping/types.js';
import type { WritableType } from '../schemas/resource-types.js';
import type { LedgerEntry } from '../state/ledger.js';
import { comparableHash } from './identity.js';
import type { IdentityDecision } from './identity-check.js';
import type { IndexedResource } from './server-index.js';

/** The server resources a key's match value designates (`ResourceSync` finds them; `ambiguous`: wait for every key). */
export type Matches = { kind: 'none' } | { kind: 'ambiguous' } | { kind: 'one'; resource: IndexedResource } | { kind: 'rejected'; issues: Issue[] };

export interface ServerView {
  /** The server's copy of the id the ledger records: `null` when the listing lacks it, undefined when not listed. */
  byId?: IndexedResource | null;
  /** The key's candidates by match rule; undefined: not looked up yet (the decision then asks to `look`). */
  matches?: Matches;
}

export interface MappedView {
  type: WritableType;
  /** The match value, or the reject its rule makes (`decideIdentity`). */
  identity: IdentityDecision;
  /** `contentHash` of the mapped resource (what the ledger records). */
  hash: string;
  /** `comparableHash` of the mapped resource (what server copies are compared by). */
  comparable: string;
}

export type Decision =
  | { kind: 'reject'; issues: Issue[] }
  /** `pending`: an earlier create's outcome is unknown; `ambiguous`: identical copies, settled once every key is known. */
  | { kind: 'defer'; why: 'pending' | 'ambiguous' }
  /** The server must be searched by match rule first (decide again with `matches`); `gone`: why a recorded key is. */
  | { kind: 'look'; gone?: string }
  /** `recreate`: why a key the state records is created again; `blind`: `never` creates without looking. */
  | { kind: 'create'; recreate?: string; blind?: true }
  /** The server's copy taken over; `update`: its content differs, so it is updated too. */
  | { kind: 'adopt'; resource: IndexedResource; update: boolean }
  /** `onServer` (also of `unchanged`): the listed copy, when the type was listed. */
  | { kind: 'update'; serverId: string; onServer?: IndexedResource }
  /** `drift`: nothing is sent, yet the server's copy differs or is gone (`always` would update or create it). */
  | { kind: 'unchanged'; serverId: string; onServer?: IndexedResource; drift?: 'differs' | 'gone' };

/** A decision made with the key's candidates known: never `look`. */
export type Looked = Exclude<Decision, { kind: 'look' }>;
/** A decision from the candidates alone (`decideFound`). */
export type FoundDecision = Extract<Decision, { kind: 'reject' | 'defer' | 'create' | 'adopt' }>;

/**
 * A key the ledger holds as synced with the same hash is left alone (under `always` only if the server's copy
 * matches); a recorded id the server lacks is found again or created; a key without an id is looked up by its
 * match rule (not under `never`) and adopted or created.
 */
export function decide(entry: LedgerEntry | undefined, server: ServerView & { matches: Matches }, mapped: MappedView, policy: ReconcilePolicy): Looked;
export function decide(entry: LedgerEntry | undefined, server: ServerView, mapped: MappedView, policy: ReconcilePolicy): Decision;
export function decide(entry: LedgerEntry | undefined, server: ServerView, mapped: MappedView, policy: ReconcilePolicy): Decision {
  if (!mapped.identity.ok) return { kind: 'reject', issues: mapped.identity.issues };
  if (entry?.status === 'pending') return { kind: 'defer', why: 'pending' };
  let gone: string | undefined;
  if (entry?.serverId) {
    const { byId } = server;
    const id = entry.serverId;
    if (!(byId === null && policy === 'always')) {
      const same = entry.status === 'synced' && entry.hash === mapped.hash && !entry.endedAt;
      const listed = byId ? { onServer: byId } : {};
      if (same && (policy !== 'always' || byId?.hash === mapped.comparable)) return { kind: 'unchanged', serverId: id, ...listed, ...driftOf(byId, mapped) };
      // Without a listing the run learns a missing copy from its update's 404, then decides again with `byId: null`.
      if (byId !== null) return { kind: 'update', serverId: id, ...listed };
    }
    gone = `${mapped.type}/${id} recorded in the state is gone from the server`;
  }
  if (policy === 'never' && !gone) return { kind: 'create', blind: true };
  if (!server.matches) return gone ? { kind: 'look', gone } : { kind: 'look' };
  return decideFound(server.matches, mapped.comparable, gone);
}

/** The decision once the key's candidates are known (also how deferred keys are settled). */
export function decideFound(matches: Matches, comparable: string, recreate?: string): FoundDecision {
  switch (matches.kind) {
    case 'rejected':
      return { kind: 'reject', issues: matches.issues };
    case 'ambiguous':
      return { kind: 'defer', why: 'ambiguous' };
    case 'none':
      return recreate ? { kind: 'create', recreate } : { kind: 'create' };
    case 'one':
      return { kind: 'adopt', resource: matches.resource, update: matches.resource.hash !== comparable };
  }
}

function driftOf(byId: IndexedResource | null | undefined, mapped: MappedView): { drift?: 'differs' | 'gone' } {
  if (byId === undefined) return {};
  if (byId === null) return { drift: 'gone' };
  return byId.hash === mapped.comparable ? {} : { drift: 'differs' };
}

/**
 * What an update of a care team with `onMissing: end` sends, given the server's team: participants gone from
 * the export are kept with `period.end` = `now`; `same`: that is what the server holds already (nothing to send).
 */
export function teamUpdate(mapped: Resource, server: Resource, now: Date): { body: Resource; endedMembers: string[]; same: boolean } {
  const body = endDroppedParticipants(mapped, server, now);
  return { body, endedMembers: newlyEndedMembers(server, body), same: comparableHash(body) === comparableHash(server) };
}

/** Participants present on the server but gone from the export are kept, with `period.end` = run date. */
function endDroppedParticipants(mapped: Resource, server: Resource, now: Date): Resource {
  type P = { member?: { reference?: string }; period?: { start?: string; end?: string } };
  const current = (server.participant as P[] | undefined) ?? [];
  const next = (mapped.participant as P[] | undefined) ?? [];
  const kept = new Set(next.map((p) => p.member?.reference));
  const dropped = current
    .filter((p) => p.member?.reference && !kept.has(p.member.reference))
    .map((p) => (p.period?.end ? p : { ...p, period: { ...p.period, end: now.toISOString() } }));
  return dropped.length ? { ...mapped, participant: [...next, ...dropped] } : mapped;
}

/** Members whose participant is open on the server and carries a `period.end` in `next`: the associations `next` ends. */
function newlyEndedMembers(server: Resource, next: Resource): string[] {
  type P = { member?: { reference?: string }; period?: { end?: string } };
  const open = new Set(((server.participant as P[] | undefined) ?? []).filter((p) => p.member?.reference && !p.period?.end).map((p) => p.member!.reference!));
  return ((next.participant as P[] | undefined) ?? []).filter((p) => p.period?.end && open.has(p.member?.reference ?? '')).map((p) => p.member!.reference!);
}
