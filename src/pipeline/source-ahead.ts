/**
 * A mapping's source opened, and its first record read, while the mappings it waits for end (issue 28: the phase
 * boundary). Once the patients' creates have ended, the care teams' file is opened and its first chunk parsed
 * during the patients' check, so that the check's end is followed by the first row's transform, not by opening a
 * file: nothing is transformed, resolved, recorded or sent ahead — a `$ref` is resolved when the phase reads the
 * row, after its targets' check, as before.
 */
import { statSync } from 'node:fs';
import { openSource, SourceBytes, type SourceConfig, type SourceItem } from '../sources/open-source.js';

/** One source read ahead: its first record waits in `#first` until the phase takes the reading over. */
export class SourceAhead {
  readonly bytes = new SourceBytes();
  readonly #abort = new AbortController();
  readonly #it: AsyncIterator<SourceItem>;
  readonly #first: Promise<IteratorResult<SourceItem>>;

  constructor(source: SourceConfig, signal: AbortSignal | undefined) {
    const signals = [signal, this.#abort.signal].filter((s): s is AbortSignal => s !== undefined);
    this.#it = openSource(source, { signal: AbortSignal.any(signals), bytes: this.bytes })[Symbol.asyncIterator]();
    this.#first = this.#it.next();
    this.#first.catch(() => {}); // met by the phase when it reads (the same error a reading started then meets)
  }

  /** The reading for the phase: the record read ahead, then the rest; `signal` stops it as it stops a source opened then. */
  take(signal: AbortSignal): AsyncIterable<SourceItem> {
    signal.addEventListener('abort', () => this.#abort.abort(signal.reason), { once: true });
    const it = this.#it;
    let first: Promise<IteratorResult<SourceItem>> | undefined = this.#first;
    return {
      [Symbol.asyncIterator]: () => ({
        next: () => {
          const p = first ?? it.next();
          first = undefined;
          return p;
        },
        return: async () => (await it.return?.()) ?? { done: true, value: undefined },
      }),
    };
  }

  /** Not taken (the mapping never started): the reading stopped and the file closed. */
  async close(): Promise<void> {
    this.#abort.abort();
    await this.#first.catch(() => undefined);
    await this.#it.return?.().catch(() => undefined);
  }
}

/**
 * The run's sources read ahead: a mapping's, once every mapping it waits for (`prerequisites`) has ended its creates
 * — the check after them (verify.ts) is what it still waits for. Each is taken by its mapping's phase, or closed at
 * the run's end.
 */
export class SourcesAhead {
  readonly #ahead = new Map<string, SourceAhead>();
  readonly #createsEnded = new Set<string>();

  constructor(
    readonly prerequisites: ReadonlyMap<string, readonly string[]>,
    readonly sourceOf: (mapping: string) => SourceConfig,
    readonly signal: AbortSignal | undefined,
  ) {}

  /** `mapping` sent its last create (and settled it): the mappings now waiting only for checks read ahead. */
  createsEnded(mapping: string): void {
    this.#createsEnded.add(mapping);
    for (const [name, before] of this.prerequisites) {
      if (this.#ahead.has(name) || this.#createsEnded.has(name) || !before.includes(mapping)) continue;
      if (!before.every((b) => this.#createsEnded.has(b))) continue;
      try {
        const source = this.sourceOf(name);
        // Regular files only: opening a FIFO waits for its writer in a thread nothing can stop — one opened ahead for a
        // mapping that never starts (a failed prerequisite) would keep the run from ending (found by review).
        if (!statSync(source.path).isFile()) continue;
        this.#ahead.set(name, new SourceAhead(source, this.signal));
      } catch {
        // not opened ahead (the run stopping, a source it cannot open): the phase opens it when it starts, and meets that
      }
    }
  }

  /**
   * The mapping's source read ahead, for its phase. It stays listed: closed again at the run's end (a no-op once the
   * phase read or closed it), so that a phase failing while it is built leaves no file open (found by review).
   */
  take(mapping: string): SourceAhead | undefined {
    return this.#ahead.get(mapping);
  }

  /** Every source read ahead closed: those whose mapping never started, and any a phase left open. */
  async close(): Promise<void> {
    const left = [...this.#ahead.values()];
    this.#ahead.clear();
    await Promise.all(left.map((a) => a.close()));
  }
}
