import { dirname, isAbsolute, relative } from 'node:path';
import { formatLocation, type Issue } from '../core/issues.js';
import { redactKnown } from '../core/secret.js';
import type { MappingCounts, RunReport } from '../pipeline/run-report.js';
import { excerptOf, readRejectLines, rejectPlace } from '../pipeline/rejects.js';
import { handOverIssue, type HandedOverIssue } from '../pipeline/hand-over.js';
import type { RejectRecord, RejectStage } from '../transform/reject-record.js';

/**
 * The content shared by the HTML and Markdown run reports (`run --report FILE.html|.md`): one model built from the
 * RunReport and the rejects file, rendered twice. Nothing here writes a file.
 *
 * What it holds of the rejects, unless `includeRows`: where (file, lines/records), the mapping, the source key, the
 * stage, the issue codes and messages — the fields of `rejects.summary.csv` — never `row`, `raw` or `rowExcerpt`.
 */
export interface RunReportInput {
  report: RunReport;
  /** The rejects of the run, as read from its rejects file (`readRejectsFile`); `row`/`raw` are read only with `includeRows`. */
  rejects: RejectRecord[];
  /** Show each rejected row's original content (escaped) under its reason: patient data, off by default. */
  includeRows?: boolean;
  /** Default: `care-etl run report — <folder>/<mapping file>`. */
  title?: string;
  /** The rejects went to a pipe or a device (`--rejects /dev/fd/N`, a FIFO): not read back, so `rejects` is empty. */
  rejectsStreamed?: boolean;
}

/** Row outcomes of a mapping, in chart order. Each row read ends in exactly one of them (a `groupBy` group: one per group; `skipped` counts rows). */
export const OUTCOMES = [
  { key: 'created', label: 'created' },
  { key: 'updated', label: 'updated' },
  { key: 'unchanged', label: 'unchanged' },
  { key: 'written', label: 'written (dry run)' },
  { key: 'notSelected', label: 'not selected' },
  { key: 'skipped', label: 'skipped' },
  { key: 'rejected', label: 'rejected' },
] as const satisfies readonly { key: keyof MappingCounts; label: string }[];
export type OutcomeKey = (typeof OUTCOMES)[number]['key'];

/** Columns of the counts table (README: read, created, updated, unchanged, adopted, rejected, ended, written). */
export const COUNT_COLUMNS: readonly (keyof MappingCounts)[] = ['read', 'created', 'updated', 'unchanged', 'adopted', 'rejected', 'ended', 'written'];

/** Lines, records, keys, ended associations listed at most per group / section; the rest is counted ("… and N more"). */
export const MAX_LISTED = 500;
/** Rejected rows shown per reason with `includeRows`. */
export const MAX_ROWS_PER_GROUP = 200;
/** Characters of one row's rendering shown with `includeRows`. */
export const MAX_ROW_CHARS = 64 * 1024;

export interface Listed<T> {
  items: T[];
  /** How many were left out (beyond MAX_LISTED). */
  more: number;
}

/** Where a group's rows are in one source file. */
export interface GroupPlace {
  /** Relative to the mapping's folder when inside it. */
  file: string;
  /** CSV/NDJSON lines (every line of a `groupBy` group), ascending, distinct. */
  lines: Listed<number>;
  /** JSON record numbers (sources without lines), ascending, distinct. */
  records: Listed<number>;
}

/** One reason for rejection: rows of one mapping rejected at the same stage with the same issue (see `groupKeyOf`). */
export interface RejectGroup {
  mapping: string;
  stage: RejectStage;
  code: string;
  /** The message when all rows of the group have the same one; else its normalised form (`normaliseMessage`). */
  reason: string;
  /** When messages differ: the first one, as an example. */
  example?: string;
  /** The issue's JSON path (validate: inside the resource; transform: inside the mapping), when it has one. */
  path?: string;
  /** `file:line:col` of the expression in the mapping file, when the issue points there. */
  at?: string;
  /** The mapping's jargon for the reason (`handOverIssue`'s detail): its name, the expression's role and position, hints. */
  detail?: string;
  /** Reasons (`R2`) of the rows these rows refer to (`ref-rejected`): their causes, listed before them. */
  causedBy?: string[];
  /** Rejected rows (or `groupBy` groups). */
  count: number;
  places: GroupPlace[];
  /** Distinct source keys, in order of appearance. */
  keys: Listed<string>;
  /** Rows of the group rejected before their key was known. */
  keyless: number;
  /** Further issues of the same rows (beyond the first, which makes the group): code and message → count. */
  moreIssues: { code: string; message: string; count: number }[];
  /** With `includeRows`: the rejected rows (at most MAX_ROWS_PER_GROUP), each rendered as text. */
  rows?: Listed<{ where: string; key?: string; text: string }>;
}

export interface ReportModel {
  title: string;
  report: RunReport;
  includeRows: boolean;
  exitMeaning: string;
  /** What the run did, in plain words (`64 resources loaded (patient 30, …); 9 rows need fixing in the export — see below`). */
  headline: string;
  /** As in the report (absolute). */
  mappingFile: string;
  /** baseUrl without user info (never shown even if a URL carried it). */
  targetUrl?: string;
  duration: string;
  /** Mappings in run order, with their counts. */
  mappings: { name: string; counts: MappingCounts }[];
  /** Whether the run had `--only-rejected` (a `not selected` column). */
  hasNotSelected: boolean;
  /** Whether rows were skipped (`where:`, a map producing nothing): a `skipped` column. */
  hasSkipped: boolean;
  groups: RejectGroup[];
  /** Rejects given (the rejects file's lines); may differ from `report.totals.rejected` when the file was cut or edited. */
  rejectCount: number;
  ended: Listed<RunReport['ended'][number]>;
  /** Keys an earlier run loaded that the export no longer holds (`onMissing: ignore`): listed, total. */
  vanished: { items: NonNullable<RunReport['vanished']>; total: number };
  /** Run-level notices: stopped early, interrupted, rejects file mismatch. */
  notices: string[];
}

const EXIT_MEANINGS: Record<number, string> = {
  0: 'every row loaded',
  1: 'some rows were rejected (or --max-errors was reached); the other rows were loaded',
  2: 'usage, mapping, configuration or authentication error: nothing was loaded',
  3: 'could not complete (interrupted, or the server unreachable or failing): the next run goes on where this one stopped',
  4: 'plan: the run would write to the server',
  5: 'the ending guard refused: nothing was ended for a mapping whose export lost too many keys (see the warnings); the rows were loaded',
};

export function exitMeaning(code: number, dryRun: boolean): string {
  if (dryRun && code === 0) return 'every row mapped and validated';
  if (dryRun && code === 1) return 'some rows were rejected (or --max-errors was reached); the other rows were mapped and validated';
  return EXIT_MEANINGS[code] ?? 'unknown exit code';
}

/**
 * How reject messages are grouped: the same reason often names the row's own key, line or value count
 * (`key \`000005\` was already used by line 6`, `expected 11 fields (header, line 1), got 12`). Backticked spans
 * become `…` (keys, column names, formats, lookup tables — all quoted that way by care-etl), runs of digits
 * become `#`, and white space is collapsed. Double-quoted text is kept (JSONata string literals in hints).
 */
export function normaliseMessage(message: string): string {
  return message
    .replace(/`[^`]*`/g, '`…`')
    .replace(/\d+/g, '#')
    .replace(/\s+/g, ' ')
    .trim();
}

/**
 * The group of a reject: its mapping, stage, first issue's code, that issue's JSON path (digits normalised: the
 * `/telecom/0/value` of one row and `/telecom/1/value` of another are one field) and mapping-file location (the
 * expression that failed; a location in the source file itself — the row's own line — is left out), and the
 * normalised message (`normaliseMessage`). Further issues of a row are listed under its group, not grouped again.
 */
export function groupKeyOf(r: RejectRecord): string {
  const i = r.issues?.[0];
  return JSON.stringify([
    r.mapping,
    r.stage,
    i?.code ?? '',
    i?.path ? normaliseMessage(i.path) : '',
    mappingLocation(r, i) ?? '',
    i ? normaliseMessage(String(i.message ?? '')) : '',
  ]);
}

function mappingLocation(r: RejectRecord, i: Issue | undefined): string | undefined {
  const loc = i?.location;
  if (!loc?.file || loc.file === r.file) return undefined;
  return formatLocation(loc);
}

/** Paths inside `base` are shown relative to it (the mapping's folder), others as they are. */
export function displayPath(file: string, base: string): string {
  const rel = relative(base, file);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : file;
}

/** `https://user:pass@host/x?y` → `https://host/x?y`; not a URL: as given. */
export function displayUrl(url: string): string {
  try {
    const u = new URL(url);
    if (!u.username && !u.password) return url;
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    return url;
  }
}

/** `406 ms`, `12.3 s`, `3 min 05 s`, `2 h 04 min`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const total = Math.round(s);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const sec = total % 60;
  return h ? `${h} h ${String(m).padStart(2, '0')} min` : `${m} min ${String(sec).padStart(2, '0')} s`;
}

/** `2026-11-24T08:54:20.760Z` → `2026-11-24 08:54:20 UTC`; anything else as given. */
export function formatTime(iso: string): string {
  const m = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.\d+)?Z$/.exec(iso);
  return m ? `${m[1]} ${m[2]} UTC` : iso || '—';
}

function listed<T>(all: T[], max = MAX_LISTED): Listed<T> {
  return all.length > max ? { items: all.slice(0, max), more: all.length - max } : { items: all, more: 0 };
}

/** `line 21`, `lines 3, 4, 5, 48`, `record 7` (for one reject, `includeRows`). */
function whereOf(r: RejectRecord, base: string): string {
  const file = displayPath(String(r.file ?? ''), base);
  const many = r.lines?.length ? r.lines : undefined;
  if (r.line !== undefined) return `${file} ${many && many.length > 1 ? `lines ${many.join(', ')}` : `line ${r.line}`}`;
  if (r.record !== undefined) return `${file} ${many && many.length > 1 ? `records ${many.join(', ')}` : `record ${r.record}`}`;
  return file;
}

/** A rejected row's content as text (`includeRows`): the parsed row, else the line as read, else the excerpt kept. */
function rowText(r: RejectRecord): string {
  let text: string;
  if (r.row !== undefined) {
    try {
      text = JSON.stringify(r.row, null, 2) ?? String(r.row);
    } catch {
      text = excerptOf(r.row, MAX_ROW_CHARS);
    }
  } else if (typeof r.raw === 'string') text = r.raw;
  else if (typeof r.rowExcerpt === 'string') text = r.rowExcerpt;
  else text = '(no row content in the rejects file)';
  if (r.rowOmitted) text = `${text}\n(${r.rowOmitted})`;
  return text.length > MAX_ROW_CHARS ? `${text.slice(0, MAX_ROW_CHARS)}… (cut at ${MAX_ROW_CHARS} characters)` : text;
}

interface GroupAcc {
  group: RejectGroup;
  /** `[mapping, key]` of the rows this group's rows refer to (`ref-rejected`). */
  refersTo: Set<string>;
  messages: Set<string>;
  places: Map<string, { lines: Set<number>; records: Set<number> }>;
  keys: string[];
  keySet: Set<string>;
  more: Map<string, { code: string; message: string; count: number }>;
  rows: { where: string; key?: string; text: string }[];
  rowsMore: number;
}

/** A reason's detail beside its mapping and position, shown apart: without the mapping's name and the `at …` position. */
function reportDetail(detail: string | undefined, mapping: string): string | undefined {
  const owner = `mapping \`${mapping}\``;
  const rest = (detail?.startsWith(owner) ? detail.slice(owner.length).trim() : detail)?.replace(/(^|, )at [^,]*$/, '').replace(/^, |, $/g, '');
  return rest || undefined;
}

const refKey = (mapping: unknown, key: unknown): string => JSON.stringify([String(mapping), String(key)]);

/**
 * The rejects grouped by reason (`groupKeyOf`): causes before consequences (a `ref-rejected` row after the reject of
 * the row it refers to, with that reason's number), then the largest group first, then in order of first appearance.
 */
export function groupRejects(rejects: RejectRecord[], opts: { baseDir: string; includeRows?: boolean; rejectsFile?: string }): RejectGroup[] {
  const accs = new Map<string, GroupAcc>();
  const places = new Map<string, string>();
  for (const r of rejects)
    if (r.key !== undefined && r.key !== null && !places.has(refKey(r.mapping, r.key))) places.set(refKey(r.mapping, r.key), rejectPlace(r, opts.baseDir));
  const causeOf = (mapping: string, key: string) => places.get(refKey(mapping, key));
  for (const given of rejects) {
    // The report is handed over: issues as `handOverIssue` words them (the full messages stay in the rejects file).
    const r = {
      ...given,
      issues: (given.issues ?? []).map((i): HandedOverIssue => (i && typeof i === 'object' ? handOverIssue(i, { rejectsFile: opts.rejectsFile, causeOf }) : i)),
    };
    const first = r.issues?.[0];
    const k = groupKeyOf(r);
    let a = accs.get(k);
    if (!a) {
      const message = first ? String(first.message ?? '') : 'rejected (no issue recorded)';
      a = {
        group: {
          mapping: String(r.mapping),
          stage: r.stage,
          code: first ? String(first.code) : '—',
          reason: message,
          path: first?.path,
          at: mappingLocation(r, first) ? formatLocation({ ...first!.location, file: displayPath(first!.location!.file!, opts.baseDir) }) : undefined,
          detail: reportDetail(first?.detail, String(r.mapping)),
          count: 0,
          places: [],
          keys: { items: [], more: 0 },
          keyless: 0,
          moreIssues: [],
        },
        refersTo: new Set(),
        messages: new Set(),
        places: new Map(),
        keys: [],
        keySet: new Set(),
        more: new Map(),
        rows: [],
        rowsMore: 0,
      };
      accs.set(k, a);
    }
    const g = a.group;
    g.count++;
    if (first?.refersTo) a.refersTo.add(refKey(first.refersTo.mapping, first.refersTo.key));
    if (first) {
      const m = String(first.message ?? '');
      if (a.messages.size === 0) g.example = m;
      a.messages.add(m);
      if (first.path !== g.path) g.path = first.path === undefined || g.path === undefined ? undefined : normaliseMessage(g.path);
    }
    const file = displayPath(String(r.file ?? ''), opts.baseDir);
    let p = a.places.get(file);
    if (!p) a.places.set(file, (p = { lines: new Set(), records: new Set() }));
    const many = r.lines?.length ? r.lines : undefined;
    if (r.line !== undefined) for (const n of many ?? [r.line]) p.lines.add(n);
    else if (r.record !== undefined) for (const n of many ?? [r.record]) p.records.add(n);
    if (r.key === undefined || r.key === null) g.keyless++;
    else if (!a.keySet.has(String(r.key))) {
      a.keySet.add(String(r.key));
      a.keys.push(String(r.key));
    }
    for (const i of (r.issues ?? []).slice(1)) {
      const mk = JSON.stringify([String(i?.code), normaliseMessage(String(i?.message ?? ''))]);
      const e = a.more.get(mk);
      if (e) e.count++;
      else a.more.set(mk, { code: String(i?.code), message: String(i?.message ?? ''), count: 1 });
    }
    if (opts.includeRows) {
      if (a.rows.length < MAX_ROWS_PER_GROUP)
        a.rows.push({ where: whereOf(r, opts.baseDir), key: r.key === undefined ? undefined : String(r.key), text: rowText(r) });
      else a.rowsMore++;
    }
  }
  return causesFirst(finishGroups(accs, opts.includeRows));
}

function finishGroups(accs: Map<string, GroupAcc>, includeRows: boolean | undefined): { group: RejectGroup; refersTo: Set<string> }[] {
  const groups: { group: RejectGroup; refersTo: Set<string> }[] = [];
  for (const a of accs.values()) {
    const g = a.group;
    if (a.messages.size > 1) g.reason = normaliseMessage(g.example ?? g.reason);
    else g.example = undefined;
    const num = (s: Set<number>) => [...s].sort((x, y) => x - y);
    g.places = [...a.places].map(([file, p]) => ({ file, lines: listed(num(p.lines)), records: listed(num(p.records)) }));
    g.keys = listed(a.keys);
    g.moreIssues = [...a.more.values()].sort((x, y) => y.count - x.count);
    if (includeRows) g.rows = { items: a.rows, more: a.rowsMore };
    groups.push({ group: g, refersTo: a.refersTo });
  }
  return groups;
}

/**
 * Consequences (`ref-rejected`) after every other reason, each naming the reasons of the rows it refers to; the
 * rest largest first, equal counts in their order of first appearance (the order of the run).
 */
function causesFirst(groups: { group: RejectGroup; refersTo: Set<string> }[]): RejectGroup[] {
  const isConsequence = (x: { refersTo: Set<string> }) => (x.refersTo.size > 0 ? 1 : 0);
  const sorted = groups
    .map((x, i) => ({ x, i }))
    .sort((p, q) => isConsequence(p.x) - isConsequence(q.x) || q.x.group.count - p.x.group.count || p.i - q.i)
    .map((p) => p.x);
  for (const c of sorted) {
    if (!c.refersTo.size) continue;
    const ids = sorted.flatMap((cause, i) =>
      cause !== c && cause.group.keys.items.some((k) => c.refersTo.has(refKey(cause.group.mapping, k))) ? [`R${i + 1}`] : [],
    );
    if (ids.length) c.group.causedBy = ids;
  }
  return sorted.map((x) => x.group);
}

export function buildReportModel(input: RunReportInput): ReportModel {
  const { report } = input;
  const base = dirname(report.mappingFile);
  const includeRows = input.includeRows ?? false;
  const mappings = (report.order?.length ? report.order : Object.keys(report.mappings))
    .filter((n) => report.mappings[n])
    .map((name) => ({ name, counts: report.mappings[name]! }));
  const notices: string[] = [];
  if (report.interrupted) notices.push(`Interrupted (SIGINT/SIGTERM): ${report.stoppedEarly ?? 'the rows not read yet are loaded by the next run'}`);
  else if (report.stoppedEarly) notices.push(`Stopped early: ${report.stoppedEarly}`);
  const rejected = report.totals?.rejected ?? 0;
  if (input.rejectsStreamed) {
    if (rejected) notices.push(`The rejects went to ${report.rejectsFile}, a pipe or a device: not read back, so their reasons are not listed here.`);
  } else if (input.rejects.length !== rejected) {
    notices.push(
      `The rejects file holds ${input.rejects.length} reject(s) but the run counted ${rejected}: the file was replaced or edited since, or is not this run's.`,
    );
  }
  const folder = base.split(/[\\/]/).filter(Boolean).pop();
  const file = report.mappingFile.split(/[\\/]/).pop() ?? report.mappingFile;
  return {
    title: input.title ?? `care-etl run report — ${folder ? `${folder}/` : ''}${file}`,
    report,
    includeRows,
    exitMeaning: exitMeaning(report.exitCode, report.dryRun),
    headline: headlineOf(report, mappings, input.rejectsStreamed ? rejected : input.rejects.length),
    mappingFile: report.mappingFile,
    targetUrl: report.target ? displayUrl(report.target.baseUrl) : undefined,
    duration: formatDuration(report.durationMs),
    mappings,
    hasNotSelected: report.selection !== undefined || mappings.some((m) => m.counts.notSelected !== undefined),
    hasSkipped: mappings.some((m) => (m.counts.skipped ?? 0) > 0),
    groups: groupRejects(input.rejects, { baseDir: base, includeRows, rejectsFile: report.rejectsFile }),
    rejectCount: input.rejects.length,
    ended: listed(report.ended ?? []),
    vanished: { items: (report.vanished ?? []).slice(0, MAX_LISTED), total: report.vanishedCount ?? 0 },
    notices,
  };
}

/**
 * The run in plain words for the report's banner — what was loaded, what needs fixing — instead of an exit code:
 * `64 resources loaded (patient 30, practitioner 6, careteam 28); 9 rows need fixing in the export — see below.`
 */
function headlineOf(report: RunReport, mappings: { name: string; counts: MappingCounts }[], rejects: number): string {
  const done = (c: MappingCounts) => (report.dryRun ? Number(c.written ?? 0) : Number(c.created ?? 0) + Number(c.updated ?? 0) + Number(c.unchanged ?? 0));
  const total = mappings.reduce((n, m) => n + done(m.counts), 0);
  const each = mappings.map((m) => `${m.name} ${done(m.counts).toLocaleString('en-US')}`).join(', ');
  const verb = report.dryRun ? 'mapped and checked (dry run: nothing sent)' : 'loaded';
  const parts = [`${total.toLocaleString('en-US')} resource${total === 1 ? '' : 's'} ${verb}${mappings.length ? ` (${each})` : ''}`];
  if (rejects > 0)
    parts.push(`${rejects.toLocaleString('en-US')} row${rejects === 1 ? '' : 's'} need${rejects === 1 ? 's' : ''} fixing in the export — see below`);
  else if (report.exitCode <= 1) parts.push('no row needs fixing');
  if (report.exitCode === 2) parts.push('the run did not start: nothing was loaded (see the warnings)');
  if (report.exitCode === 3) parts.push('the run stopped before the end: the next run goes on where it stopped');
  if (report.exitCode === 5) parts.push('nothing was ended: the export lost too many keys (see the warnings)');
  return `${parts.join('; ')}.`;
}

/** The outcome segments of a mapping's bar (zero counts left out). */
export function outcomesOf(c: MappingCounts): { key: OutcomeKey; label: string; value: number }[] {
  return OUTCOMES.map((o) => ({ key: o.key, label: o.label, value: Number(c[o.key] ?? 0) })).filter((o) => o.value > 0);
}

/** Text from a report (messages, keys, paths): known secrets redacted before it is escaped for HTML or Markdown. */
export const clean = (s: unknown): string => redactKnown(s === undefined || s === null ? '' : String(s));

/**
 * Reads a rejects file (NDJSON, as `run` writes it), streaming. Without `keepRows` each record's `row`, `raw` and
 * `rowExcerpt` are dropped as it is read (patient data; and memory: rows can be large). Lines that are not a
 * JSON object are skipped (`unreadable`). A missing file: no rejects.
 */
export async function readRejectsFile(path: string, opts: { keepRows?: boolean } = {}): Promise<{ rejects: RejectRecord[]; unreadable: number }> {
  const rejects: RejectRecord[] = [];
  let unreadable = 0;
  for await (const r of (await readRejectLines(path)) ?? []) {
    if (!r || typeof r.mapping !== 'string') {
      unreadable++;
      continue;
    }
    const rec = r as RejectRecord;
    if (!Array.isArray(rec.issues)) rec.issues = [];
    if (!opts.keepRows) {
      delete rec.row;
      delete rec.raw;
      delete rec.rowExcerpt;
    }
    rejects.push(rec);
  }
  return { rejects, unreadable };
}

/** The concurrency the run settled on, and how (pinned, or discovered under which ceiling): summary line and reports. */
export function describeConcurrency(c: NonNullable<RunReport['concurrency']>): string {
  if (c.mode === 'pinned')
    return `pinned at ${c.ceiling} (--concurrency); ${c.maxInFlight} request(s) in flight at most${c.settled < c.ceiling ? `, mostly ${c.settled} (lowered on 429/503)` : ''}`;
  const from =
    c.started === undefined ? '' : c.rememberedFrom === undefined ? ` from ${c.started}` : ` from ${c.started}, where run ${c.rememberedFrom} settled`;
  return `settled at ${c.settled} request(s) in flight (discovered${from}; largest window ${c.max}, ceiling ${c.ceiling}: --max-concurrency)`;
}

/** The count columns of the per-mapping table: `notSelected` only for an `--only-rejected` run that left rows out; `skipped` when rows were. */
export function countColumns(m: ReportModel): (keyof MappingCounts)[] {
  const cols = [...COUNT_COLUMNS];
  if (m.hasNotSelected) cols.splice(1, 0, 'notSelected');
  if (m.hasSkipped) cols.splice(1, 0, 'skipped');
  return cols;
}
