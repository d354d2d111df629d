import type { Issue } from '../core/issues.js';
import { getResourceValidator } from '../schemas/resource-schemas.js';
import type { WritableType } from '../schemas/resource-types.js';

/**
 * Validates a mapped resource against the same JSON Schemas the sandbox enforces (`schemas/`), so a row that
 * the server would answer with 400 is rejected before any request. Returns every issue (capped by the
 * validator), paths as JSON pointers into the resource.
 */
export function validateResource(type: WritableType, resource: unknown): Issue[] {
  const issues = getResourceValidator(type)(resource);
  const rt = (resource as { resourceType?: unknown } | null)?.resourceType;
  if (rt !== type) {
    issues.unshift({ severity: 'error', code: 'invalid', path: '/resourceType', message: `Expected resourceType \`${type}\`, got \`${String(rt)}\`` });
  }
  return issues;
}
