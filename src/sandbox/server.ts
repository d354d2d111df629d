/**
 * The sandbox: a local server implementing the whole Care Coordination API (docs/sandbox.md). This file starts and
 * stops it; requests go through routing.ts (auth → capacity → faults → handler), handlers.ts (the operations),
 * faults.ts and capacity.ts (what can be injected), http.ts (answers and bodies), store.ts (SQLite).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getResourceValidator, type Validator } from '../schemas/resource-schemas.js';
import { RESOURCE_TYPES } from '../schemas/resource-types.js';
import { CapacityGate, type CapacityStats, type CapacityTimeline } from './capacity.js';
import { COUNT_PARAMS, type CountParam, type SandboxContext } from './context.js';
import { checkFaults, Faults, type FaultOptions } from './faults.js';
import { generateObservations, insertObservation, MAX_PAGE_SIZE } from './handlers.js';
import { oo, Replies, type Json } from './http.js';
import { OBSERVATION_CODE_MODES, type ObservationCodeMode } from './observations.js';
import { handle, sha256 } from './routing.js';
import { SandboxStore } from './store.js';

export type { FaultOptions } from './faults.js';

export interface SandboxOptions {
  /** Default 127.0.0.1; a non-loopback address is refused unless allowRemote. */
  host?: string;
  allowRemote?: boolean;
  /** Default 0 = ephemeral. */
  port?: number;
  /** SQLite file (durable, a restart keeps the data); default in-memory. */
  dataFile?: string;
  apiKey?: string;
  emrId?: string;
  tenants?: string[];
  /** Observation generation seed (default 42). */
  seed?: number;
  /** Observations generated when a patient is created (default 2: one PHQ-9, one GAD-7). */
  observationsPerPatient?: number;
  /** `code` of generated Observations: `coded` (default: LOINC coding + text) or `text-only` (only `code.text`, as the spec shows). */
  observationCode?: ObservationCodeMode;
  /** Default page size of lists (default 50); `_count` overrides, max 1000. */
  pageSize?: number;
  /**
   * Like servers whose list answers have a fixed shape, fill what a resource does not carry with `null` in list
   * results (not in single reads): `spec` (default) participant role codings without `system`/`code`/`display`,
   * as the specification says; `all` also absent optional top-level fields (outside the bundle schema: for
   * tests of clients that must ignore such nulls); `none`.
   */
  listNulls?: 'spec' | 'all' | 'none';
  /**
   * What `_count` on a list does: `honour` (default; at most 1000), `ignore` (pages of `pageSize` whatever is asked,
   * as a server that ignores unknown query parameters), `reject` (400, as a server that takes none).
   */
  countParam?: CountParam;
  /** Default 1 MiB → 413. */
  maxBodyBytes?: number;
  /** Deepest nesting of objects and arrays a request body may have (default 64) → 400 beyond. */
  maxBodyDepth?: number;
  faults?: FaultOptions;
}

export interface SandboxStats {
  requests: number;
  byStatus: Record<string, number>;
  dropped: number;
  ambiguousCreates: number;
  /** Creates stored, then answered 502/503/504 (`gatewayErrorRate`). */
  gatewayErrors: number;
  /** tenant → resource type → count. */
  resources: Record<string, Record<string, number>>;
  /** Requests served at once and waiting for a slot (`maxInFlight`): now and at most. */
  capacity: CapacityStats;
}

export interface Sandbox {
  /** e.g. http://127.0.0.1:41235 (no trailing slash). */
  url: string;
  port: number;
  credentials: { apiKey: string; emrId: string; tenants: string[] };
  setFaults(faults: FaultOptions | undefined): void;
  /** Test/bench hooks (not HTTP): add Observations verbatim (id/meta assigned when missing) or generate N per existing patient. */
  addObservations(tenant: string, observations: object[]): void;
  generateObservations(tenant: string, perPatient: number): number;
  /** Test hook (the API has no DELETE): a resource removed on the server's side, as an operator might. */
  removeResource(tenant: string, type: string, id: string): boolean;
  stats(): SandboxStats;
  /** Requests served at once per 100 ms since the first one (benches: where a client left the server idle). */
  capacityTimeline(): CapacityTimeline;
  close(): Promise<void>;
}

export const DEFAULT_CREDENTIALS = {
  apiKey: 'sandbox-key',
  emrId: 'sandbox-emr',
  tenants: ['demo-clinic', 'other-clinic'],
} as const;

const isLoopback = (h: string): boolean => h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || /^::ffff:127\./i.test(h);

/** The shared state of a new sandbox, from its options (validated). */
function createContext(opts: SandboxOptions, credentials: Sandbox['credentials']): SandboxContext {
  checkFaults(opts.faults);
  const stats = { requests: 0, byStatus: {} as Record<string, number>, dropped: 0, ambiguousCreates: 0, gatewayErrors: 0 };
  const capacity = new CapacityGate();
  capacity.setLimit(opts.faults?.maxInFlight);
  return {
    store: new SandboxStore(opts.dataFile),
    replies: new Replies(stats.byStatus, { maxBody: opts.maxBodyBytes ?? 1024 * 1024, maxDepth: opts.maxBodyDepth ?? 64 }),
    validators: new Map<string, Validator>(RESOURCE_TYPES.map((t) => [t, getResourceValidator(t)])),
    emrId: credentials.emrId,
    tenants: new Set(credentials.tenants),
    keyDigest: sha256(credentials.apiKey),
    seed: opts.seed ?? 42,
    obsPerPatient: opts.observationsPerPatient ?? 2,
    observationCode: opts.observationCode ?? 'coded',
    pageSize: Math.min(Math.max(1, opts.pageSize ?? 50), MAX_PAGE_SIZE),
    listNulls: opts.listNulls ?? 'spec',
    countParam: opts.countParam ?? 'honour',
    source: `urn:care-etl:sandbox#${credentials.emrId}`,
    stats,
    patientOrdinal: new Map(),
    capacity,
    faults: opts.faults ? new Faults(opts.faults) : undefined,
    closed: false,
    url: '',
  };
}

export async function startSandbox(opts: SandboxOptions = {}): Promise<Sandbox> {
  const host = opts.host ?? '127.0.0.1';
  if (!opts.allowRemote && !isLoopback(host))
    throw new Error(`Refusing to listen on non-loopback address ${host}: the sandbox is for local use (set allowRemote to override)`);
  if (opts.observationCode !== undefined && !OBSERVATION_CODE_MODES.includes(opts.observationCode))
    throw new Error(`Expected \`observationCode\` to be one of ${OBSERVATION_CODE_MODES.join(', ')}, got \`${String(opts.observationCode)}\``);
  if (opts.countParam !== undefined && !COUNT_PARAMS.includes(opts.countParam))
    throw new Error(`Expected \`countParam\` to be one of ${COUNT_PARAMS.join(', ')}, got \`${String(opts.countParam)}\``);
  const credentials = {
    apiKey: opts.apiKey ?? DEFAULT_CREDENTIALS.apiKey,
    emrId: opts.emrId ?? DEFAULT_CREDENTIALS.emrId,
    tenants: [...(opts.tenants ?? DEFAULT_CREDENTIALS.tenants)],
  };
  const ctx = createContext(opts, credentials);
  const { store } = ctx;
  const genRounds = new Map<string, number>();
  const requireTenant = (tenant: string): void => {
    if (!ctx.tenants.has(tenant)) throw new Error(`unknown tenant ${tenant}`);
  };

  const server = createServer((req, res) => {
    handle(ctx, req, res).catch((err: unknown) => {
      if (res.headersSent || res.destroyed) return;
      ctx.replies.fail(res, 500, [oo('exception', `internal sandbox error: ${(err as Error)?.message ?? String(err)}`)]);
    });
  });
  // Longer than undici's default keep-alive so clients, not the server, decide when to drop idle sockets.
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  ctx.url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;

  return {
    url: ctx.url,
    port,
    credentials,
    setFaults(f) {
      checkFaults(f);
      ctx.faults = f ? new Faults(f) : undefined;
      ctx.capacity.setLimit(f?.maxInFlight);
    },
    addObservations(tenant, observations) {
      requireTenant(tenant);
      const now = new Date().toISOString();
      store.transaction(() => {
        for (const o of observations) insertObservation(ctx, tenant, o as Json, now);
      });
    },
    generateObservations(tenant, perPatient) {
      requireTenant(tenant);
      const round = (genRounds.get(tenant) ?? 0) + 1;
      genRounds.set(tenant, round);
      const ids = store.ids(tenant, 'Patient');
      const now = new Date().toISOString();
      store.transaction(() => ids.forEach((pid, i) => generateObservations(ctx, tenant, `${tenant}|r${round}|p${i}`, pid, perPatient, now)));
      return ids.length * perPatient;
    },
    removeResource(tenant, type, id) {
      requireTenant(tenant);
      return store.remove(tenant, type, id);
    },
    capacityTimeline: () => ctx.capacity.timeline(),
    stats() {
      return { ...ctx.stats, byStatus: { ...ctx.stats.byStatus }, resources: ctx.closed ? {} : store.counts(), capacity: ctx.capacity.stats() };
    },
    async close() {
      if (ctx.closed) return;
      ctx.closed = true;
      ctx.capacity.drain(); // requests waiting for a slot see `closed` and drop their sockets
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      store.close();
    },
  };
}
