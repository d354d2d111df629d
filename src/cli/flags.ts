/**
 * Every flag of care-etl, defined once under its name (the connection flags: `connection-flags.ts`). Each entry
 * is a definition: a command calls it (`flag.state()`), or derives a variant — another description, default or
 * choice list — by passing those (`flag.state({ description })`), never by defining the name again.
 * Combinations are declared here (`dependsOn`, `exclusive`, `relationships`), so oclif refuses them (exit 2)
 * before a library function runs; CareCommand's usage error then quotes the flag's description as the hint.
 */
import { resolve } from 'node:path';
import { Flags } from '@oclif/core';
import type { BooleanFlag, OptionFlag } from '@oclif/core/interfaces';
import { RECONCILE_POLICIES } from '../mapping/types.js';
import { VERIFY_POLICIES } from '../load/duplicate-check.js';
// Both are small and dependency-free: the flags' help needs their defaults before `run()`.
import { AdaptiveLimiter } from '../load/adaptive-concurrency.js';
import { registerStateSecret } from '../state/state-location.js';
import { allowEndingFlag, durationFlag, nonNegativeFlag, positiveIntFlag, rateFlag } from './number-flags.js';
import { parseRejectThreshold, rejectThresholdError } from '../pipeline/reject-threshold.js';

const { DEFAULT_MAX_CONCURRENCY, DISCOVERY_START } = AdaptiveLimiter;

type IntBounds = { min?: number; max?: number };
type Relationships = NonNullable<OptionFlag<string>['relationships']>;
type IntDefaults = Partial<OptionFlag<number, IntBounds>> & IntBounds;
/** An integer flag's definition: its variants may change the bounds, the description or the default. */
type IntDefinition = { (variant: IntDefaults & { default: number }): OptionFlag<number>; (variant?: IntDefaults): OptionFlag<number | undefined> };
function integer(defaults: IntDefaults): IntDefinition {
  return ((variant: IntDefaults = {}) => Flags.integer({ ...defaults, ...variant } as IntBounds)) as IntDefinition;
}
function defaultedInteger(defaults: IntDefaults & { default: number }): (variant?: IntDefaults) => OptionFlag<number> {
  return (variant: IntDefaults = {}) => Flags.integer({ ...defaults, ...variant } as IntBounds & { default: number });
}

function booleanFlag(defaults: Partial<BooleanFlag<boolean>>) {
  return (variant: Partial<BooleanFlag<boolean>> = {}) => Flags.boolean({ ...defaults, ...variant });
}

/**
 * `--help` shows a flag's `summary` (one line at 80 columns); its `description` keeps every detail for
 * docs/commands.md. For the definitions made by a helper (number-flags.ts), which take a description only.
 */
function summarized<D>(definition: D, extra: { summary: string; helpGroup?: string }): D {
  const define = definition as (variant: object) => unknown;
  return ((variant: object = {}) => define({ ...extra, ...variant })) as D;
}

/** A value checked when parsed, p-queue style ("Expected `--query` to be key=value, got `x`"). */
function checkedString(
  defaults: { summary?: string; description: string; relationships?: Relationships },
  check: (input: string) => Promise<string | undefined> | string | undefined,
) {
  return Flags.custom<string>({
    ...defaults,
    parse: async (input) => {
      const problem = await check(input);
      if (problem) throw new Error(problem);
      return input;
    },
  });
}

/** `--out` of `export` beside `--dictionary`: the dictionary would overwrite the export (or its partial file). */
const sameFileAsOut = async (f: Record<string, unknown>) =>
  typeof f.out === 'string' &&
  f.out !== '-' &&
  typeof f.dictionary === 'string' &&
  [resolve(f.out), resolve(`${f.out}.partial`)].includes(resolve(f.dictionary));

export const flag = {
  // ---------------------------------------------------------------- every command (CareCommand.baseFlags)
  verbose: booleanFlag({
    summary: 'one line per HTTP request; stack traces',
    char: 'v',
    description: 'more detail on stderr: one redacted line per HTTP request, stack traces of unexpected errors',
    helpGroup: 'OUTPUT',
    exclusive: ['quiet'],
  }),
  quiet: booleanFlag({
    summary: 'errors only; the exit code tells the rest',
    char: 'q',
    description: 'print errors only (no progress, no summary); the exit code tells the rest',
    helpGroup: 'OUTPUT',
  }),
  // issue 25: Node 20 itself reads `--env-file` anywhere on the command line (a missing file exits 9 before care-etl
  // starts), so the flag is `--dotenv`; `--env-file` stays an alias (it works on Node 20 when the file exists).
  dotenv: Flags.custom<string>({
    summary: 'variables file (default: .env beside the mapping)',
    description:
      'read variables (CARE_API_KEY, …) from this file of KEY=value lines; default: a .env file beside the mapping, if any. Variables already set win. Alias: --env-file',
    aliases: ['env-file'],
    helpGroup: 'OUTPUT',
  }),
  // issue 26 (ci): JSON lines on stderr, one per event (src/cli/json-log.ts).
  'log-format': Flags.custom<string>({
    summary: 'stderr as text (default) or json lines',
    description:
      'stderr as text (progress, messages; the default) or json: one JSON object per line and event (phase, progress, reject, request with --verbose, verdict)',
    options: ['text', 'json'],
    helpValue: '<text|json>',
    helpGroup: 'OUTPUT',
  }),
  /** oclif's own `--json` (enableJsonFlag), for a command that declares what it excludes. */
  json: booleanFlag({ description: 'Format output as json.', helpGroup: 'GLOBAL' }),

  // ---------------------------------------------------------------- shared by several commands
  state: Flags.custom<string>({
    parse: async (v) => (registerStateSecret(v), v),
    summary: 'state file, or a postgres:// URL',
    description:
      "state ledger: a file (default .care-etl/state.db beside the mapping), or a shared PostgreSQL state postgres://user@host:5432/db[?schema=name] (password in PGPASSWORD or ~/.pgpass); also CARE_STATE_URL, then the mapping's state:",
  }),
  progress: Flags.custom<string>({
    summary: 'on stderr: auto|bar|lines|none',
    helpGroup: 'OUTPUT',
    helpValue: '<how>',
    description: 'progress display (stderr)',
    options: ['auto', 'bar', 'lines', 'none'],
    default: 'auto',
  }),
  out: Flags.custom<string>({ description: 'output file' }),
  limit: integer({ description: 'entries shown at most', min: 0 }),
  'page-size': integer({ description: 'page size of a listing', min: 1 }),
  // issue 24 (gateway): a DURATION (`90`, `90s`, `2m`, `1h`, `500ms`; bare = seconds), parsed to ms.
  'max-retry-after': summarized(
    durationFlag(
      'max-retry-after',
      "longest wait a server's Retry-After is honoured for (seconds, or 500ms / 2m / 1h; default 120s); a longer one stops the run (exit 3)",
      'such as 120, 120s, 2m or 500ms',
      { helpGroup: 'CONNECTION' },
    ),
    { summary: 'longest Retry-After honoured (default 120s)' },
  ),
  'index-page-size': integer({
    summary: "_count of a listing (0: the server's own)",
    helpGroup: 'SERVER',
    description: "page size (_count) asked for when listing the server; 0 = the server's own (default 1000; a server that refuses _count is asked without it)",
    min: 0,
  }),
  reconcile: Flags.custom<string>({
    summary: 'list the server for new keys: auto|always|never',
    helpGroup: 'SERVER',
    helpValue: '<when>',
    description:
      "when to list the server to find resources the state does not know (lost or new state, a tenant loaded by another tool): auto = before creating any key the state does not hold; always = also check recorded ones still exist and match; never = trust the state (overrides the mapping's reconcile:)",
    options: [...RECONCILE_POLICIES],
  }),
  'verify-after-load': Flags.custom<string>({
    summary: 'list created types again: auto|always|never',
    helpGroup: 'SERVER',
    helpValue: '<when>',
    description:
      "list each type this run created again as its phase's creates end (started before, timed to end with them): keys another writer (a second runner with its own state) created too are rejected as duplicate-on-server naming both ids, creates answered with an id the server lacks go back to pending (exit 1). auto (default) = when the phase created something, unless a shared state holds the lease; always; never",
    options: [...VERIFY_POLICIES],
  }),
  'allow-ending': summarized(
    allowEndingFlag(
      "onMissing: end — how many resources of each mapping this run may end (care teams) or deactivate (patients, practitioners): a count or a percentage of the mapping's loaded ones, e.g. 25%; above it nothing is ended for that mapping (exit 5). Wins over the mapping's allowEnding: (default 10%). An empty or header-only source ends nothing unless this says 100%",
    ),
    { summary: 'most resources a run may end: N or N% (default 10%)' },
  ),

  // ---------------------------------------------------------------- run
  'dry-run': booleanFlag({
    summary: 'no network: write the resources to --out',
    description: 'do everything but the network; write the resources per type as NDJSON to --out',
  }),
  rejects: Flags.custom<string>({
    summary: 'rejects file (default .care-etl/rejects.ndjson)',
    description:
      'rejects file, NDJSON (default .care-etl/rejects.ndjson beside the mapping); its redacted summary is written beside it (<name>.summary.csv; none beside a pipe or device, which is written in place); --only-rejected reads it',
  }),
  report: Flags.custom<string>({
    summary: 'also write a report: .html, .md or JSON',
    description:
      'also write the report to this file (mode 0600): FILE.html a self-contained page to hand over, FILE.md Markdown (CI job summaries), anything else JSON',
  }),
  'include-rows': booleanFlag({
    summary: 'report: show the rejected rows (patient data)',
    description: 'HTML/Markdown report: show the rejected rows themselves (patient data) under each reason',
  }),
  concurrency: integer({
    summary: 'pin the requests in flight at N',
    helpGroup: 'SERVER',
    description: "pin the requests in flight at N instead of discovering the server's capacity (429/503 still lower it for a while)",
    min: 1,
    exclusive: ['max-concurrency'],
  }),
  'max-concurrency': summarized(
    positiveIntFlag(
      'max-concurrency',
      `ceiling of the discovered concurrency (default ${DEFAULT_MAX_CONCURRENCY}): requests in flight grow from ${DISCOVERY_START} (or from where the last run of the same server and tenant settled, kept in the state) while the server's response time stays flat, and back off when it rises, on 429 and on 503`,
    ),
    { summary: `most requests in flight (default ${DEFAULT_MAX_CONCURRENCY})`, helpGroup: 'SERVER' },
  ),
  'wait-for-lock': summarized(
    durationFlag(
      'wait-for-lock',
      'another run holds the lease of this server and tenant in the state: wait up to this long for it (e.g. 90s, 10m, 1h; a plain number is seconds), a line every 30 s, instead of exit 3 at once',
      'like 30s, 10m or 1h',
    ),
    { summary: "wait this long for another run's lease", helpGroup: 'SERVER' },
  ),
  'max-errors': integer({ summary: 'stop after N rejected rows (exit 1)', description: 'stop once this many rows were rejected (exit 1)', min: 1 }),
  // issue 26 (ci): dbt's error_if for rejects.
  'fail-on-rejects': Flags.custom<string>({
    summary: 'exit 0 up to N or P% rejected rows',
    description:
      'exit 0 when the rejected rows are at most this many, or this percentage of the rows read (e.g. 7 or 0.5%); they are still reported. Default: any reject is exit 1',
    parse: async (input) => {
      if (!parseRejectThreshold(input)) throw new Error(rejectThresholdError(input));
      return input.trim();
    },
  }),
  'only-rejected': booleanFlag({
    summary: 'send only the rows the last run rejected',
    description:
      'send only the rows the last run rejected (its rejects file: --rejects, default .care-etl/rejects.ndjson), read from the current source: by key, or by file and line for rows rejected before their key was known; the other rows are read but not sent, onMissing: end is skipped',
  }),

  // ---------------------------------------------------------------- validate, test, init
  sample: integer({
    description: 'run the first N rows of each source through transform, validation and the offline load checks; exit 1 if one is rejected',
    min: 1,
  }),
  'allow-rejects': booleanFlag({
    description: 'with --sample: report rejected sampled rows but exit 0 (an export known to hold bad rows)',
    dependsOn: ['sample'],
  }),
  grep: Flags.custom<string>({ char: 'g', description: 'only run the cases whose name contains this text' }),
  // issue 26 (ci): CI systems read JUnit XML (GitLab's reports:junit, GitHub test-report actions).
  reporter: Flags.custom<string>({
    description: 'text: the case list on stdout; junit: JUnit XML, to --out or else on stdout (the summary then on stderr)',
    options: ['text', 'junit'],
    default: 'text',
    relationships: [{ type: 'none', flags: [{ name: 'json', when: async (f) => f.reporter === 'junit' && f.out === undefined }] }],
  }),
  from: Flags.custom<string>({ description: 'an export file (CSV, JSON or NDJSON); repeat for several', required: true, multiple: true }),
  force: booleanFlag({ description: 'overwrite the output file if it exists' }),

  // ---------------------------------------------------------------- export
  columns: Flags.custom<string>({
    summary: 'YAML file of columns (header → JSONata)',
    description: "YAML file with `columns:` (header → JSONata) instead of the mapping's exports:; long layout only",
    relationships: [{ type: 'none', flags: [{ name: 'layout', when: async (f) => f.layout === 'wide' }] }],
  }),
  format: Flags.custom<string>({
    summary: 'csv, ndjson or parquet',
    helpValue: '<format>',
    description: 'output format',
    options: ['csv', 'ndjson', 'parquet'],
    default: 'csv',
  }),
  bom: booleanFlag({
    summary: 'CSV: start with a byte order mark (Excel)',
    description: 'CSV only (--format csv): start with a UTF-8 byte order mark (Excel)',
    relationships: [{ type: 'none', flags: [{ name: 'format', when: async (f) => f.format !== 'csv' }] }],
  }),
  'escape-formulas': booleanFlag({
    summary: "CSV: prefix formula-like cells with ' (default on)",
    description:
      "CSV: prefix text cells starting with = + - @ tab CR with ' (formula injection; on by default for CSV, never for NDJSON/Parquet); --no-escape-formulas for CSV read by code",
    allowNo: true,
    relationships: [{ type: 'none', flags: [{ name: 'format', when: async (f) => f.format !== 'csv' && f['escape-formulas'] === true }] }],
  }),
  // issue 27 (wide): SQL-friendly names.
  'column-names': Flags.custom<string>({
    summary: 'original or snake_case column names',
    description: 'original: headers as built ("PHQ-9 (44261-6)"; default for CSV, NDJSON); snake: phq_9_44261_6 (default for Parquet)',
    options: ['original', 'snake'],
  }),
  layout: Flags.custom<string>({
    summary: 'a row per observation, or per patient/day',
    helpValue: '<long|wide>',
    description: 'long: one row per observation; wide: one row per patient and day, one column per instrument',
    options: ['long', 'wide'],
    default: 'long',
  }),
  pseudonymize: booleanFlag({
    summary: 'keyed pseudonyms, no free text',
    description:
      'replace patient source keys and server ids by keyed pseudonyms (HMAC-SHA-256; key in CARE_PSEUDONYM_KEY or --pseudonym-key-file) and drop free text',
  }),
  'pseudonym-key-file': Flags.custom<string>({
    summary: 'file holding the pseudonym key',
    description: 'with --pseudonymize: file holding the key (wins over CARE_PSEUDONYM_KEY)',
    dependsOn: ['pseudonymize'],
  }),
  'keep-free-text': booleanFlag({
    summary: 'with --pseudonymize: keep free text',
    description:
      'with --pseudonymize: keep free text (value strings, notes, reference display names — may hold names); an export without --pseudonymize keeps everything',
    dependsOn: ['pseudonymize'],
  }),
  dictionary: checkedString(
    {
      summary: 'also write a data dictionary here',
      description: 'also write a data dictionary of the columns to this file (.json → JSON, else CSV); another file than --out',
      relationships: [{ type: 'none', flags: [{ name: 'out', when: sameFileAsOut }] }],
    },
    (input) => (input === '' || input === '-' ? `Expected \`--dictionary\` to be a file path, got \`${input}\`` : undefined),
  ),
  since: checkedString(
    {
      summary: 'updated since: last, or a date',
      description: 'only observations updated since: `last` (the previous --since last export), an ISO date or a date-time with a zone',
    },
    async (input) => {
      if (input === 'last') return undefined;
      const { parseSince } = await import('../export/observation-exporter.js');
      parseSince(input, '--since'); // throws the p-queue-style message
      return undefined;
    },
  ),
  overlap: defaultedInteger({
    summary: '--since last: seconds re-read',
    description: '--since last: seconds re-read before the previous export started (clock skew, late commits)',
    default: 60,
    min: 0,
  }),
  patient: Flags.custom<string>({
    summary: 'only this patient (source key); repeatable',
    description: 'only this patient (source key, e.g. MRN); repeatable',
    multiple: true,
    multipleNonGreedy: true,
    parse: async (input) => {
      if (input.trim() === '') throw new Error('Expected `--patient` to be a patient source key, got an empty value');
      return input.trim();
    },
  }),
  query: Flags.custom<string>({
    summary: 'query parameter k=v; repeatable',
    description: 'query parameter k=v for the first request (servers that support filters); repeatable',
    multiple: true,
    multipleNonGreedy: true,
    parse: async (input) => {
      if (input.indexOf('=') <= 0) throw new Error(`Expected \`--query\` to be key=value, got \`${input}\``);
      return input;
    },
  }),
  // issue 27 part "view": the ViewDefinition defines rows and columns; what it cannot combine with is refused here
  view: Flags.custom<string>({
    description: 'SQL-on-FHIR v2 ViewDefinition (JSON) over Observation: write the columns it defines (docs/export-views.md)',
    exclusive: ['columns', 'pseudonymize', 'since', 'patient', 'dictionary', 'column-names'],
    relationships: [{ type: 'none', flags: [{ name: 'layout', when: async (f) => f.layout === 'wide' }] }],
  }),

  // ---------------------------------------------------------------- sandbox
  port: defaultedInteger({ description: 'TCP port (0 = any free port)', default: 8080, min: 0, max: 65535 }),
  host: Flags.custom<string>({ description: 'loopback address to listen on', default: '127.0.0.1' }),
  data: Flags.custom<string>({ description: 'SQLite file that keeps the data across restarts (default: in memory)' }),
  seed: defaultedInteger({ description: 'seed of the generated Observations', default: 42 }),
  'observations-per-patient': defaultedInteger({ description: 'Observations generated per created patient', default: 2, min: 0 }),
  // issue 27 (wide): a server that follows the spec sends `code.text` only.
  'observation-code': Flags.custom<string>({
    description: 'code of generated Observations: coded (LOINC coding + text) or text-only (only code.text, as the service spec shows)',
    options: ['coded', 'text-only'],
    default: 'coded',
  }),
  'count-param': Flags.custom<string>({
    description: '_count on lists: honour it (max 1000), ignore it (pages of --page-size) or reject it (400)',
    options: ['honour', 'ignore', 'reject'],
    default: 'honour',
  }),
  // p-queue style validation (number-flags.ts), so a typo never silently turns a fault off.
  latency: nonNegativeFlag('latency', 'milliseconds added before each answer'),
  'max-in-flight': positiveIntFlag(
    'max-in-flight',
    'requests served at once; the others wait in a first-come queue, so past it the latency grows (a server to saturate; default unlimited)',
  ),
  jitter: nonNegativeFlag('jitter', 'random extra milliseconds (0..jitter) added before each answer'),
  'rate-limit': nonNegativeFlag('rate-limit', 'requests per second per tenant before 429 + Retry-After'),
  'error-503-rate': rateFlag('error-503-rate', 'share of requests answered 503 + Retry-After: 1 (not processed)'),
  'drop-rate': rateFlag('drop-rate', 'share of requests whose connection is dropped before processing'),
  'ambiguous-create-rate': rateFlag('ambiguous-create-rate', 'share of creates stored but answered by a dropped connection'),
  'gateway-error-rate': rateFlag('gateway-error-rate', 'share of creates stored, then answered 502/503/504 with an HTML page (a gateway)'),
  'fault-seed': integer({ description: 'seed of the fault PRNG (replays the same faults)' }),

  // ---------------------------------------------------------------- studio (issue 29)
  open: booleanFlag({
    description: 'open the studio in a browser (best effort); --no-open only prints its URL',
    allowNo: true,
    default: true,
  }),

  // ---------------------------------------------------------------- runs (a shared state holds every runner's runs)
  tenant: Flags.custom<string>({ description: 'only the runs of this tenant id' }),
  server: Flags.custom<string>({ description: 'only the runs against this server (its base URL; a trailing / is ignored)' }),
};
