import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/**
 * A package required when first used, not when its importer loads: packages a command may not need stay off every
 * command's start-up (issue 28 item 3). `require` because it is synchronous (a lazy `import()` would make every caller
 * async); for a CommonJS-only package it also skips the ESM loader's lexing (jsonata-package.ts).
 */
export function requiredWhenUsed<T>(name: string): () => T {
  let loaded: T | undefined;
  return () => (loaded ??= require(name) as T);
}
