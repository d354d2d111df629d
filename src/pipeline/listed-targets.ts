/**
 * Dependents started while their `$ref` target's verification listing is read (issue 28 item 1): a row may go as
 * soon as every resource it refers to that this run created has been listed by the server; a row referring to one
 * not listed yet waits, and is mapped again once it is (or once the target mapping is done — a target found missing
 * is then rejected, and the row's `$ref` fails in the same words as when the dependent started after it).
 */
import type { EvalContext } from '../mapping/functions.js';

/** The server ids one mapping created in this run, until its verification listing shows them. */
export class ListedTargets {
  readonly #unlisted: Set<string>;
  readonly #waiting = new Map<string, (() => void)[]>();
  #closed = false;
  #failure: { error: unknown } | undefined;

  constructor(createdIds: Iterable<string>) {
    this.#unlisted = new Set(createdIds);
  }

  /** Created in this run and not listed yet (false once the mapping is done; still true if it failed: nothing of it is sent). */
  unlisted(id: string): boolean {
    return (!this.#closed || this.#failure !== undefined) && this.#unlisted.has(id);
  }

  /** Ids of a listed page (checked by the listing). */
  listed(ids: Iterable<string>): void {
    for (const id of ids) {
      if (!this.#unlisted.delete(id) || !this.#waiting.size) continue;
      const wake = this.#waiting.get(id);
      this.#waiting.delete(id);
      for (const w of wake ?? []) w();
    }
  }

  /** Settles when `id` is listed or the mapping is done; rejects with the mapping's failure (nothing then waits to be sent). */
  waitFor(id: string): Promise<void> {
    if (this.#failure) return Promise.reject(this.#failure.error);
    if (!this.unlisted(id)) return Promise.resolve(); // listed, or the mapping is done
    return new Promise<void>((resolve, reject) => {
      const wake = () => (this.#failure ? reject(this.#failure.error) : resolve());
      const w = this.#waiting.get(id);
      if (w) w.push(wake);
      else this.#waiting.set(id, [wake]);
    });
  }

  /** The mapping is done (its findings booked), or failed: every waiting row goes on. */
  close(failure?: { error: unknown }): void {
    this.#closed = true;
    this.#failure ??= failure;
    const waiting = [...this.#waiting.values()].flat();
    this.#waiting.clear();
    for (const w of waiting) w();
  }
}

/**
 * A phase's evaluation context noting the `$ref`s to resources not listed yet, and `hold`: after each mapped row, the
 * wait for those (undefined when there is none — no promise per row). Rows are mapped one after another in a phase,
 * so what was noted since the last `hold` belongs to that row.
 */
export function refsHeldUntilListed(
  base: EvalContext,
  targets: ReadonlyMap<string, ListedTargets>,
): { ctx: EvalContext; hold: (mapped: boolean) => Promise<unknown> | undefined } {
  let noted: { targets: ListedTargets; id: string }[] = [];
  const ctx: EvalContext = {
    ...base,
    resolveRef(name, key) {
      const ref = base.resolveRef(name, key);
      const t = targets.get(name);
      if (t) {
        const id = ref.slice(ref.indexOf('/') + 1);
        if (t.unlisted(id)) noted.push({ targets: t, id });
      }
      return ref;
    },
  };
  const hold = (mapped: boolean): Promise<unknown> | undefined => {
    if (!noted.length) return undefined;
    const now = noted;
    noted = [];
    if (!mapped) return undefined;
    return Promise.all(now.map((n) => n.targets.waitFor(n.id)));
  };
  return { ctx, hold };
}
