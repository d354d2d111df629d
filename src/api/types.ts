/** Loose shapes of what the API exchanges; the JSON Schemas in `schemas/` are the precise definition. */
export interface Meta {
  versionId?: string;
  lastUpdated?: string;
  source?: string;
}

export interface Resource {
  resourceType: string;
  id?: string;
  meta?: Meta;
  [field: string]: unknown;
}

/** A resource as the server returns it: with its id (and meta). */
export type StoredResource = Resource & { id: string };

export interface BundleLink {
  relation: string;
  url: string;
}

export interface Bundle<R extends Resource = Resource> {
  resourceType: 'Bundle' | string;
  id?: string;
  meta?: { lastUpdated?: string };
  type?: string;
  link?: BundleLink[];
  entry?: { fullUrl?: string; resource: R }[];
}
