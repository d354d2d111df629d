/** A JSON-like object: what `JSON.parse` or YAML's `toJS` gives for `{…}` (never an array, never null). */
export type Obj = Record<string, unknown>;

export const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);
