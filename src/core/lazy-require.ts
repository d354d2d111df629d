import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/**
 * A package required when first used, not when its importer loads: packages a command may not need stay off every
 * command's start-up (issue 28 item 3). Their CommonJS builds, through `require`, for jsonata-package.ts's reason.
 */
export function requiredWhenUsed<T>(name: string): () => T {
  let loaded: T | undefined;
  return () => (loaded ??= require(name) as T);
}
