import { createRequire } from 'node:module';
import type jsonata from 'jsonata';

/**
 * The `jsonata` package through `require`, not `import`: Node 20's ESM loader lexes a CommonJS package's whole source
 * in JavaScript (cjs-module-lexer) to find its export names — jsonata.js is 300 KB, a single file — and V8 then
 * optimises that lexer on a background thread: ~45 ms of start-up CPU and more in the background, paid by every
 * command (issue 28 item 3, bench/load-throughput.mjs). The same module instance as an `import` would give.
 */
export const jsonataExpression = createRequire(import.meta.url)('jsonata') as typeof jsonata;
