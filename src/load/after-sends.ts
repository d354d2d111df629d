/**
 * Work that must not delay the requests sent in reply to answers (issue 28: the window used). undici writes a
 * request on a reused keep-alive socket in the check phase of the loop iteration it was dispatched in (it first lets
 * the poll phase see a FIN the server may have sent), so whatever runs before that — the rest of the poll phase, the
 * immediates queued earlier — holds the request back while the server's slot stays empty. The loader sends the next
 * request as soon as an answer frees its slot; the answer's bookkeeping (ledger records, the next rows' transform)
 * comes here and runs once, after every request dispatched in this iteration has been written: in the last of the
 * immediates queued before the check phase began.
 */

let waiting: (() => void)[] = [];
/** The newest immediate queued: only it runs the waiting work (those before it are spent). */
let newest = 0;

/** Runs `fn` after the requests dispatched so far in this loop iteration have been written. */
export function afterSends(fn: () => void): void {
  waiting.push(fn);
  const me = ++newest;
  setImmediate(() => {
    if (me !== newest) return;
    const run = waiting;
    waiting = [];
    for (const f of run) f();
  });
}

/** `value`, handed on after the requests dispatched so far in this loop iteration have been written. */
export function afterSendsWith<T>(value: T): Promise<T> {
  return new Promise((resolve) => afterSends(() => resolve(value)));
}
