/**
 * The resource type names, defined once (schemas/*.schema.json hold their shapes). No imports: the API client,
 * the mapping and the sandbox take these without loading ajv.
 */

/** Every type the API serves: the three a mapping loads, and Observation (read-only, exported). */
export const RESOURCE_TYPES = ['Patient', 'Practitioner', 'CareTeam', 'Observation'] as const;
export type ResourceType = (typeof RESOURCE_TYPES)[number];

/** The types a mapping produces and the loader writes (`resources[].type`). */
export const WRITABLE_TYPES = ['Patient', 'Practitioner', 'CareTeam'] as const;
export type WritableType = (typeof WRITABLE_TYPES)[number];

/** How an existing resource is updated (`target.updateMethod`); the spec leaves it open per type. */
export const UPDATE_METHODS = ['PUT', 'PATCH', 'POST'] as const;
export type UpdateMethod = (typeof UPDATE_METHODS)[number];
