/**
 * Work that can wait for an answer: `fn` runs once, on a later turn of the event loop, after undici wrote the headers
 * of its next request (its `undici:client:sendHeaders` diagnostics channel) — so that CPU the run needs anyway (the
 * schema validators' compile, tens of ms) overlaps a round trip instead of adding to one. A request dispatched while
 * the loop is blocked is not written until it is free: calling `fn` right after dispatching would hold it back.
 * Returns the cancel: `fn` is not run once it is called (nothing written yet, or `fn` still waiting for its turn).
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';

const SEND_HEADERS = 'undici:client:sendHeaders';

export function afterNextRequestWritten(fn: () => void): () => void {
  let timer: ReturnType<typeof setImmediate> | undefined;
  let done = false;
  const onWritten = (): void => {
    unsubscribe(SEND_HEADERS, onWritten);
    timer = setImmediate(() => {
      done = true;
      fn();
    });
  };
  subscribe(SEND_HEADERS, onWritten);
  return () => {
    if (done) return;
    done = true;
    unsubscribe(SEND_HEADERS, onWritten);
    if (timer !== undefined) clearImmediate(timer);
  };
}
