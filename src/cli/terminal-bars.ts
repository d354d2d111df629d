/**
 * One bar line per mapping, composed for a given width: the name and the bar always; then, as room allows and in
 * this order, rows done, rejects, the ETA, the counts, the bytes read. What does not fit is dropped whole — a line
 * never exceeds the width.
 */
import type { ByteProgress, MappingCounts } from '../pipeline/run-report.js';
import { displayWidth, fitLine, type Paint } from './terminal.js';

export interface BarState {
  mapping: string;
  counts: MappingCounts;
  bytes?: ByteProgress;
  /** Already formatted: `12.3 MB / 48.0 MB`. */
  where?: string;
  etaMs?: number;
  done: boolean;
}

const BAR_MIN = 8;
const BAR_MAX = 30;
const NAME_MAX = 14;

/** Rows finished (sent, unchanged, rejected, written, skipped, not selected); adopted rows are counted in those. */
function rowsDone(c: MappingCounts): number {
  return c.created + c.updated + c.unchanged + c.rejected + c.written + c.skipped + (c.notSelected ?? 0);
}

/** The share done: of the bytes when the source's size is known, else of the rows read so far. */
function ratio(s: BarState): number {
  if (s.done) return 1;
  if (s.bytes?.total) return Math.min(1, s.bytes.read / s.bytes.total);
  const read = Math.max(s.counts.read, 1);
  return Math.min(1, rowsDone(s.counts) / read);
}

function counts(c: MappingCounts): string {
  return [
    `created ${c.created}`,
    `updated ${c.updated}`,
    `unchanged ${c.unchanged}`,
    c.adopted ? `adopted ${c.adopted}` : '',
    c.ended ? `ended ${c.ended}` : '',
  ]
    .filter(Boolean)
    .join(' · ');
}

/** `nameWidth`: the longest mapping name among the bars, so they line up (at most 14 columns). */
export function barLine(s: BarState, width: number, paint: Paint, eta: (ms: number) => string, nameWidth = s.mapping.length): string {
  const pad = Math.min(NAME_MAX, nameWidth);
  const name = s.mapping.length > pad ? `${s.mapping.slice(0, pad - 1)}…` : s.mapping.padEnd(pad);
  const mark = s.done ? paint.green('✓') : ' ';
  const c = s.counts;
  const optional = [
    s.done ? `${c.read} rows` : `${rowsDone(c)}/${c.read} rows`, // grouped rows (groupBy) finish together: done shows all read
    c.rejected ? paint.red(`${c.rejected} rejected`) : '',
    s.etaMs !== undefined && !s.done ? `ETA ${eta(s.etaMs)}` : '',
    counts(c),
    s.where ?? '',
  ].filter(Boolean);
  const fixed = displayWidth(`${mark} ${name} []`);
  let room = width - fixed - BAR_MIN;
  const shown: string[] = [];
  for (const seg of optional) {
    const w = displayWidth(seg) + 3; // ` · ` or the leading space
    if (w > room) continue;
    shown.push(seg);
    room -= w;
  }
  const barWidth = Math.max(BAR_MIN, Math.min(BAR_MAX, BAR_MIN + room));
  const filled = Math.round(ratio(s) * barWidth);
  const bar = `${paint.cyan('█'.repeat(filled))}${paint.dim('░'.repeat(barWidth - filled))}`;
  return fitLine(`${mark} ${name} [${bar}]${shown.length ? ` ${shown.join(' · ')}` : ''}`, width);
}
