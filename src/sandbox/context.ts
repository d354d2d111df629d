import type { Validator } from '../schemas/resource-schemas.js';
import type { CapacityGate } from './capacity.js';
import type { Faults } from './faults.js';
import type { ObservationCodeMode } from './observations.js';
import type { Replies } from './http.js';
import type { SandboxStore } from './store.js';

/** What a server does with `_count` on a list: honours it, ignores it, or refuses it (400). */
export const COUNT_PARAMS = ['honour', 'ignore', 'reject'] as const;
export type CountParam = (typeof COUNT_PARAMS)[number];

/** What the routing and handlers of one sandbox share: its settings, storage, counters and current faults. */
export interface SandboxContext {
  readonly store: SandboxStore;
  readonly replies: Replies;
  readonly validators: Map<string, Validator>;
  readonly emrId: string;
  readonly tenants: Set<string>;
  /** SHA-256 of the API key: compared in constant time, never the key itself. */
  readonly keyDigest: Buffer;
  /** Observation generation seed, and Observations generated per created patient. */
  readonly seed: number;
  readonly obsPerPatient: number;
  /** `code` of generated Observations: LOINC coding + text, or text only (the spec's shape). */
  readonly observationCode: ObservationCodeMode;
  readonly pageSize: number;
  readonly listNulls: 'spec' | 'all' | 'none';
  /** `_count` on lists: honoured, ignored or refused (see SandboxOptions.countParam). */
  readonly countParam: CountParam;
  /** `meta.source` of stored resources. */
  readonly source: string;
  readonly stats: { requests: number; byStatus: Record<string, number>; dropped: number; ambiguousCreates: number; gatewayErrors: number };
  /** Patients created so far per tenant: the generation key, so values depend on creation order, not random ids. */
  readonly patientOrdinal: Map<string, number>;
  readonly capacity: CapacityGate;
  faults: Faults | undefined;
  closed: boolean;
  /** Base URL, once listening: list links use it when the Host header is not usable. */
  url: string;
}
