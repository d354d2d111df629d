/**
 * When each mapping of a run may start (issue 28: keep the server busy across phase changes). A mapping waits for
 * the mappings it refers to with `$ref` (their server ids must be recorded, verified and final) and for the earlier
 * mappings of its own type (one listing and one set of match claims per type, as in a sequential run); every other
 * mapping runs alongside — Practitioner while Patient loads. The run's one limiter bounds them together.
 */
import type { CompiledMapping, CompiledResource } from '../mapping/compile-mapping.js';
import type { ReconcilePolicy } from '../mapping/types.js';
import { listingCertain } from '../load/resource-sync.js';
import type { ServerIndexes } from '../load/server-index.js';
import type { LedgerScope } from '../state/ledger.js';

/** Per mapping, the mappings that must be done before it starts (a subset of those before it in `order`). */
export function phasePrerequisites(compiled: CompiledMapping): Map<string, string[]> {
  const out = new Map<string, string[]>();
  compiled.order.forEach((name, i) => {
    const res = compiled.resources.get(name)!;
    const before = compiled.order.slice(0, i);
    const sameType = before.filter((n) => compiled.resources.get(n)!.def.type === res.def.type);
    out.set(
      name,
      before.filter((n) => res.refs.includes(n) || sameType.includes(n)),
    );
  });
  return out;
}

/**
 * Runs `runOne` for every mapping of `order`, each as soon as its prerequisites are done. After a `stop` or a
 * failure no further mapping starts; a failure also aborts `halt` (the mappings running alongside stop reading and
 * fail), those running are waited for, then the first failure (in time) is thrown.
 */
export async function runScheduled(
  order: readonly string[],
  prerequisites: ReadonlyMap<string, readonly string[]>,
  runOne: (name: string) => Promise<'next' | 'stop'>,
  halt?: AbortController,
): Promise<void> {
  let halted = false;
  let first: { error: unknown } | undefined;
  const done = new Map<string, Promise<boolean>>();
  const started: Promise<boolean>[] = [];
  for (const name of order) {
    const p = (async (): Promise<boolean> => {
      const ready = await Promise.all((prerequisites.get(name) ?? []).map((n) => done.get(n)!));
      if (halted || !ready.every(Boolean)) return false;
      try {
        const next = (await runOne(name)) === 'next';
        if (!next) halted = true;
        return next;
      } catch (err) {
        halted = true;
        first ??= { error: err };
        halt?.abort(err);
        throw err;
      }
    })();
    done.set(name, p);
    started.push(p);
  }
  // Every rejection set `first`: a mapping's own failure in its catch, a dependent's by awaiting that mapping.
  await Promise.allSettled(started);
  if (first) throw first.error;
}

/**
 * Starts now every listing the run is certain to need (`listingCertain`), all types at once, so that no phase's
 * first create waits for its type's listing. A listing that fails is not kept: the phase that needs it lists again
 * and meets the failure itself.
 */
export function startListings(
  compiled: CompiledMapping,
  indexes: ServerIndexes,
  scope: LedgerScope,
  policyOf: (res: CompiledResource) => ReconcilePolicy,
): void {
  const started = new Set<string>();
  for (const name of compiled.order) {
    const res = compiled.resources.get(name)!;
    if (started.has(res.def.type)) continue;
    const reason = listingCertain(name, scope, policyOf(res));
    if (!reason) continue;
    started.add(res.def.type);
    indexes.get(res.def.type, reason).catch(() => {});
  }
}

/**
 * What to do when a mapping meets its first key the state does not know: the mappings that refer to it with
 * `$ref` most likely have new keys too (new patients come with their care teams), so their listings start now —
 * while the mapping still loads — rather than when they start. A re-run that only updates meets no such key and
 * lists nothing.
 */
export function listingsOnNewKeys(
  compiled: CompiledMapping,
  indexes: ServerIndexes,
  policyOf: (res: CompiledResource) => ReconcilePolicy,
): (mapping: string) => void {
  return (mapping) => {
    for (const name of compiled.order) {
      const res = compiled.resources.get(name)!;
      if (!res.refs.includes(mapping) || policyOf(res) !== 'auto' || indexes.peek(res.def.type)) continue;
      indexes.get(res.def.type, `${name}: its \`$ref\` target ${mapping} has keys unknown to the state, so it most likely has too`).catch(() => {});
    }
  };
}
