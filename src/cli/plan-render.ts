/**
 * `care-etl plan` on a terminal: a table of the counts per mapping, then per mapping the first changes (updates
 * with their field diffs, creates, adoptions, ends, rejects, drift), bounded — the whole plan is `--out`/`--json`.
 * Keys and values are source text: control and bidirectional characters are escaped.
 */
import type { FieldChange } from '../load/identity.js';
import { describeReject } from '../pipeline/rejects.js';
import type { PlanDocument } from '../pipeline/plan.js';
import { PLAN_CHANGES_EXIT } from '../pipeline/plan.js';
import { ExitCode } from '../core/issues.js';
import type { MappingPlan, RunEvent } from '../pipeline/run-report.js';
import { describeIndex } from './run-progress.js';
import { table } from './render.js';

const ENDING_REFUSED_EXIT = ExitCode.endingRefused;

/** Field lines shown per update or end before "… and N more field(s)". */
export const PLAN_FIELDS_SHOWN = 8;
const VALUE_CHARS = 70;

const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const safe = (s: string): string => s.replace(UNSAFE, (c) => `\\u{${c.charCodeAt(0).toString(16)}}`);

function value(v: unknown): string {
  if (v === undefined) return '(absent)';
  const s = safe(JSON.stringify(v) ?? String(v));
  return s.length > VALUE_CHARS ? `${s.slice(0, VALUE_CHARS - 1)}…` : s;
}

/** `/telecom/0/value: "555-0101" → "555-0199"`, at most `max` lines. */
export function formatFieldChanges(diff: FieldChange[], max = PLAN_FIELDS_SHOWN): string[] {
  const lines = diff.slice(0, max).map((d) => `${safe(d.path)}: ${value(d.before)} → ${value(d.after)}`);
  if (diff.length > max) lines.push(`… and ${diff.length - max} more field(s)`);
  return lines;
}

const at = (line?: number, lines?: number[]) =>
  lines && lines.length > 1 ? ` (lines ${lines.slice(0, 5).join(', ')}${lines.length > 5 ? ', …' : ''})` : line !== undefined ? ` (line ${line})` : '';
const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

function section<T>(out: string[], items: T[], limit: number, what: string, render: (t: T) => string[]): void {
  for (const it of items.slice(0, limit)) out.push(...render(it).map((l, i) => (i === 0 ? `  ${l}` : `        ${l}`)));
  if (items.length > limit) out.push(`  … and ${items.length - limit} more ${what}`);
}

function mappingSection(name: string, m: MappingPlan, limit: number): string[] {
  const c = m.counts;
  const parts = [
    c.skipped && `${c.skipped} skipped`,
    c.created && `${c.created} to create`,
    c.updated && `${c.updated} to update`,
    c.ended && `${c.ended} to end`,
    c.adopted && `${c.adopted} adopted`,
    c.rejected && `${c.rejected} rejected`,
    c.drifted && `${c.drifted} drifted`,
  ].filter(Boolean);
  // The ending guard: shown whenever the run would end something, or refuse to (its message has counts only).
  const guard =
    m.endingGuard && m.endingGuard.wouldEnd > 0 ? [`  ${m.endingGuard.allowed ? '' : '✗ '}onMissing: end — ${safe(m.endingGuard.message ?? '')}`] : [];
  if (!parts.length && !guard.length) return [];
  const out = [``, `${name} (${m.resourceType}): ${parts.join(', ') || 'nothing to change'}`, ...guard];
  if (limit === 0) return out;
  section(out, m.updates, limit, 'update(s)', (u) => [
    `~ update ${safe(u.key)} ${m.resourceType}/${u.serverId}${u.adopted ? ' (adopted)' : ''}${at(u.line, u.lines)}`,
    ...(u.diff.length ? formatFieldChanges(u.diff) : ['(the server already holds this content; the run re-sends it to bring the state up to date)']),
  ]);
  section(out, m.creates, limit, 'create(s)', (cr) => [
    `+ create ${safe(cr.key)}${at(cr.line, cr.lines)}${cr.recreate ? ` — again: ${cr.recreate}` : ''}${cr.note ? ` — ${cr.note}` : ''}`,
  ]);
  section(
    out,
    m.adoptions.filter((a) => !a.updated),
    limit,
    'adoption(s)',
    (a) => [`= adopt ${safe(a.key)} ← ${m.resourceType}/${a.serverId} (found by the match rule, same content: recorded, nothing sent)`],
  );
  section(out, m.ends, limit, 'end(s)', (e) =>
    e.member
      ? [`- end ${e.member} in ${safe(e.key)} ${m.resourceType}/${e.serverId} (in its update)`]
      : [`- end ${safe(e.key)} ${m.resourceType}/${e.serverId} (gone from the export)`, ...formatFieldChanges(e.diff ?? [])],
  );
  section(out, m.rejects, limit, 'reject(s)', (r) => [`! reject ${describeReject({ ...r, mapping: name, source: '' })}`]);
  section(out, m.drifted, limit, 'drifted', (d) => [
    `? drift ${safe(d.key)} ${m.resourceType}/${d.serverId}: ${d.gone ? 'gone from the server' : 'the server copy differs'} (recorded as loaded: the run sends nothing)`,
    ...formatFieldChanges(d.diff ?? []),
  ]);
  return out;
}

/** The plan for a terminal: table, bounded details per mapping (`limit` items per kind; 0: the table only), what the exit code means. The counts' verdict line is `planVerdict` (stderr). */
export function renderPlan(doc: PlanDocument, limit: number, exitCode: number): string {
  const skips = doc.totals.skipped > 0; // a `skipped` column only when rows would be skipped (where:, empty map)
  const head = ['mapping', 'type', 'read', ...(skips ? ['skipped'] : []), 'create', 'update', 'unchanged', 'adopt', 'end', 'reject', 'drifted'];
  const rows = doc.order.map((n) => {
    const m = doc.mappings[n];
    const c = m?.counts;
    return [
      n,
      m?.resourceType ?? '',
      c?.read ?? 0,
      ...(skips ? [c?.skipped ?? 0] : []),
      c?.created ?? 0,
      c?.updated ?? 0,
      c?.unchanged ?? 0,
      c?.adopted ?? 0,
      c?.ended ?? 0,
      c?.rejected ?? 0,
      c?.drifted ?? 0,
    ];
  });
  const out = [table(head, rows)];
  for (const n of doc.order) if (doc.mappings[n]) out.push(...mappingSection(n, doc.mappings[n], limit));
  out.push('');
  for (const w of doc.warnings) out.push(`warning: ${w}`);
  const t = doc.totals;
  if (exitCode === ENDING_REFUSED_EXIT)
    out.push(
      `Exit code ${ENDING_REFUSED_EXIT}: the run's ending guard would refuse to end (see above; --allow-ending lifts it)${t.created + t.updated + t.ended ? ', and it would write to the server' : ''}.`,
    );
  else if (exitCode === PLAN_CHANGES_EXIT) out.push(`Exit code ${PLAN_CHANGES_EXIT}: the run would write to the server.`);
  else if (doc.interrupted) out.push('Interrupted: the plan is incomplete.');
  else if (t.rejected)
    out.push(
      `No changes to the server${t.adopted ? ' (the run would only record the adopted resources in its state)' : ''}; ${plural(t.rejected, 'row')} would be rejected (exit code 1).`,
    );
  else out.push(`No changes: the run would send nothing${t.adopted ? ' (it would only record the adopted resources in its state)' : ''}.`);
  return out.join('\n');
}

/** Progress of a plan on stderr (plain lines): target, listings, one line per mapping, the first rejects. */
export function planProgress(write: (line: string) => void, maxRejectLines = 20, showIndexes = true): { onEvent: (e: RunEvent) => void; stop: () => void } {
  let shown = 0;
  let hidden = 0;
  const interval = 2000;
  const last = new Map<string, number>();
  const line = (c: { created: number; updated: number; unchanged: number; adopted: number; rejected: number; ended: number; read: number; skipped: number }) =>
    `read ${c.read}${c.skipped ? ` · skipped ${c.skipped}` : ''} · to create ${c.created} · to update ${c.updated} · unchanged ${c.unchanged}${c.adopted ? ` · adopted ${c.adopted}` : ''}${c.ended ? ` · to end ${c.ended}` : ''} · rejected ${c.rejected}`;
  return {
    onEvent(e) {
      if (e.type === 'target')
        write(
          `Planning against ${e.embedded ? 'the embedded sandbox ' : ''}${e.baseUrl} (tenant ${e.tenantId}${e.dataFile ? `, data in ${e.dataFile}` : ''}): reads only, nothing is written`,
        );
      else if (e.type === 'index' && showIndexes)
        write(e.phase === 'start' ? `[index] listing ${e.build.resourceType} on the server (${e.build.reason})` : describeIndex('end', e.build));
      else if (e.type === 'phase-start') write(`[${e.mapping}] ${e.resourceType}: planning`);
      else if (e.type === 'progress') {
        const now = Date.now();
        if (now - (last.get(e.mapping) ?? 0) >= interval) {
          last.set(e.mapping, now);
          write(`[${e.mapping}] ${line(e.counts)}`);
        }
      } else if (e.type === 'phase-end') write(`[${e.mapping}] planned: ${line(e.counts)}`);
      else if (e.type === 'reject') {
        if (shown < maxRejectLines) {
          shown++;
          write(`  would reject ${describeReject(e.reject)}`);
        } else hidden++;
      }
    },
    stop() {
      if (hidden) write(`  … and ${hidden} more rows would be rejected (see the plan)`);
    },
  };
}
