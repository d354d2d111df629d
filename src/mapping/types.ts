import type { Issue, Location } from '../core/issues.js';
import type { UpdateMethod, WritableType } from '../schemas/resource-types.js';

/** `match:` keywords (anything else is a JSONata expression); see src/load/identity.ts. */
export const MATCH_KEYWORDS: readonly string[] = ['identifier', 'references'];

/**
 * When the loader lists the server to find resources the ledger does not know (src/load/server-index.ts):
 * `auto` before creating a key the ledger does not hold and for creates whose outcome is unknown; `always`
 * also at the start of every phase, checking recorded resources still exist and still hold what was sent;
 * `never` trusts the ledger (outcome-unknown creates are still looked up: re-sending them blindly could
 * duplicate).
 */
export type ReconcilePolicy = 'auto' | 'always' | 'never';
export const RECONCILE_POLICIES: readonly ReconcilePolicy[] = ['auto', 'always', 'never'];

/** `updateMethod: { Patient: PUT }` is normalised to `{ method: 'PUT' }`. */
export interface UpdateMethodConfig {
  method: UpdateMethod;
  /** Path template relative to baseUrl with `{type}` / `{id}` placeholders; undefined = loader default. */
  path?: string;
}

/** `target:` after `${VAR}` interpolation. Flags and CARE_* variables override it (in the command layer). */
export interface TargetConfig {
  baseUrl?: string;
  /** Secret: never log it. */
  apiKey?: string;
  emrId?: string;
  tenantId?: string;
  updateMethod?: Partial<Record<WritableType, UpdateMethodConfig>>;
  /** The file has a `target:` key (even empty or without `baseUrl`): the embedded sandbox is then refused. */
  declared?: boolean;
}

/** Sources are configured with the types of src/sources (one definition; `path` is absolute after loading). */
import type { SourceConfig } from '../sources/types.js';
export type { CsvOptions, SourceConfig, SourceFormat } from '../sources/types.js';

export interface ResourceMapping {
  name: string;
  type: WritableType;
  from: string;
  /** JSONata: stable source key. With `groupBy` and no `key` in the file, it is the groupBy expression. */
  key: string;
  groupBy?: string;
  /** JSONata row filter: rows for which it is false (`$boolean`) are skipped — not rejected, not sent. With `groupBy`: evaluated per row, before grouping. */
  where?: string;
  map: string;
  /** `identifier` / `references` (keywords) or a JSONata expression over a resource. Defaults: Patient and Practitioner `identifier`, CareTeam `references`. */
  match: string;
  /** Set in the file; the run's `--reconcile` flag wins over it (default `auto`). */
  reconcile?: ReconcilePolicy;
  onMissing: 'ignore' | 'end';
  /** `onMissing: end`: how many one run may end — a count or `P%` of the loaded (the run's `--allow-ending` wins; default: the schema's). */
  allowEnding?: number | string;
  /** Index in `resources:` (YAML path `['resources', index, …]`). */
  index: number;
  /** Where each expression string starts in the YAML, for error positions. */
  locations: { key: Location; map: Location; groupBy?: Location; match: Location; where?: Location };
  /**
   * YAML path of each expression (for `LoadedMapping.positionOf(path, offset)`): `key` points at `groupBy`
   * when the key defaults to it, `match` at `type` when it is the default `identifier`.
   */
  paths: { key: YamlPath; map: YamlPath; groupBy?: YamlPath; match: YamlPath; where?: YamlPath };
}

export type YamlPath = readonly (string | number)[];

export interface ExportColumn {
  name: string;
  expr: string;
  location: Location;
  path: YamlPath;
}

export interface ExportConfig {
  name: string;
  /** In file order. */
  columns: ExportColumn[];
}

export type ExportsConfig = Record<string, ExportConfig>;

/**
 * `limits:` after loading (schemas/mapping.schema.json `#/definitions/limits`): every value resolved — the
 * CARE_EXPRESSION_TIMEOUT_MS environment variable, else the file, else the schema's `default`.
 */
export interface MappingLimits {
  /** Wall-clock limit of one evaluation of one expression, in ms; 0 = off (only CARE_EXPRESSION_TIMEOUT_MS=0 gives it). */
  expressionTimeoutMs: number;
}

export interface LoadedMapping {
  file: string;
  dir: string;
  version: 1;
  target: TargetConfig;
  /** `state:` — the state ledger's file or postgres:// URL (src/state/state-location.ts; below --state and CARE_STATE_URL). */
  state?: string;
  sources: Record<string, SourceConfig>;
  /** Tables from `lookups:`, bound as `$<name>` in every expression and read with `$lookup`. */
  lookups: Record<string, LookupTable>;
  resources: ResourceMapping[];
  exports?: ExportsConfig;
  /** Always set by `loadMapping`; absent (a mapping built in code, e.g. a `--columns` file) = the schema defaults. */
  limits?: MappingLimits;
  /** Non-fatal findings (e.g. a literal API key in the file). */
  warnings: Issue[];
  /**
   * Location of the YAML node at `path` (e.g. `['resources', 0, 'map']`). With `offset`, the location of
   * that character of the node's string value (block and quoted scalars handled).
   */
  positionOf(path: YamlPath, offset?: number): Location | undefined;
}

/**
 * A table from `lookups:`. In memory: a null-prototype object, code → value (text for inline tables and for
 * `value:` columns; any JSON value, or with `many: true` an array of them, for expressions and whole records).
 * A file larger than the in-memory limit is indexed on disk instead (src/mapping/lookup-index.ts): an
 * `IndexedLookup`, which `$lookup` reads (it has no properties to navigate).
 */
export type LookupTable = Record<string, unknown> | IndexedLookup;

/** Marks an `IndexedLookup` (a class instance, not a code → value object). */
export const INDEXED_LOOKUP: unique symbol = Symbol('care-etl.indexedLookup');

export interface IndexedLookup {
  readonly [INDEXED_LOOKUP]: true;
  /** Distinct codes. */
  readonly size: number;
  has(code: string): boolean;
  /** The value of `code` (a fresh copy), undefined when absent. */
  get(code: string): unknown;
  /** Up to `n` codes, for messages. */
  sampleCodes(n: number): string[];
  /** Closes the index (its file is already deleted on POSIX systems, else now). Idempotent. */
  close(): void;
}

export const isIndexedLookup = (t: unknown): t is IndexedLookup => t !== null && typeof t === 'object' && INDEXED_LOOKUP in t;
