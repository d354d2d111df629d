import { issue, type Issue } from '../core/issues.js';
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
    issues.unshift(issue.invalid(`Expected resourceType \`${type}\`, got \`${String(rt)}\``, { path: '/resourceType' }));
  }
  // The loader would fail the create (the server assigns ids) and overwrite it on update: decided here, offline.
  if ((resource as { id?: unknown } | null)?.id !== undefined) {
    issues.push(
      issue.invalid('a mapping must not set `id`: the server assigns it (remove `id` from the map; the source key identifies the row)', { path: '/id' }),
    );
  }
  // The server accepts `{ "resourceType": "Patient" }` (no field is required): a map whose every field came out empty
  // would load a blank record per row — a misread column or an all-empty export, not something to send.
  if (isBlank(resource)) {
    issues.push(
      issue.error(
        'resource-empty',
        `the map produced a ${type} with nothing but its resourceType (every field empty for this row); check the columns the map reads, or make the map produce nothing (or use \`where:\`) to skip such rows`,
        { path: '' },
      ),
    );
  }
  return issues;
}

function isBlank(resource: unknown): boolean {
  return typeof resource === 'object' && resource !== null && !Array.isArray(resource) && Object.keys(resource).every((k) => k === 'resourceType');
}
