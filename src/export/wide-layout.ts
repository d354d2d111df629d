/**
 * `--layout wide`: one row per patient and UTC day, one column per questionnaire score; spooled through a
 * private SQLite file so memory stays bounded.
 * Design: docs/design/export.md.
 */
import { createHash } from 'node:crypto';
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { CareEtlError, ExitCode } from '../core/issues.js';
import { openScratchDatabase } from '../state/scratch-db.js';
import { isObj, type Obj } from '../core/is-object.js';
import { outputNames, type ColumnNameStyle } from './column-names.js';
import { observationValue } from './default-columns.js';
import type { ColumnType } from './parquet-sink.js';

export const WIDE_EXPORT_NAME = 'wide';
export const WIDE_KEY_COLUMNS = ['patient_id', 'patient_source_key', 'date'] as const;
export const WIDE_TAIL_COLUMNS = ['observations', 'superseded', 'last_updated'] as const;
/** Types of the wide columns in a typed output (Parquet): the instrument columns hold scores (`WIDE_SCORE_TYPE`). */
export const WIDE_COLUMN_TYPES: ReadonlyMap<string, ColumnType> = new Map<string, ColumnType>([
  ['date', 'date'],
  ['observations', 'integer'],
  ['superseded', 'integer'],
  ['last_updated', 'timestamp'],
]);
export const WIDE_SCORE_TYPE: ColumnType = 'integer';
/** More distinct instruments than this is not a table an analyst can use: refused (exit 2). */
export const MAX_WIDE_INSTRUMENTS = 1000;

const LOINC = 'http://loinc.org';
/** LOINC codes of total scores with a well-known short name. */
export const KNOWN_INSTRUMENTS: Readonly<Record<string, string>> = {
  '44261-6': 'PHQ-9',
  '55758-7': 'PHQ-2',
  '70274-6': 'GAD-7',
};

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

export interface Instrument {
  key: string;
  /** Column header. */
  name: string;
  /** Header before `--column-names` (the dictionary maps `name` back to it). */
  label?: string;
  system?: string;
  /** Coding code; absent for a column keyed by `code.text`. */
  code?: string;
  /** First coding display seen (control characters removed), for the data dictionary. */
  display?: string;
  /** Keyed by `code.text`: the spellings seen (bounded; control characters as JSON escapes) that normalise to this key. */
  texts?: string[];
}

/** One-line, control-free, bounded text (a header or a dictionary description). */
function plainText(s: string, max = 200): string {
  const t = s
    .replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

/** A header that starts like a formula gets the same `'` a cell would. */
const headerSafe = (s: string): string => (/^[=+\-@\t\r＝＋－＠]/.test(s) ? `'${s}` : s);

/**
 * The column key of a `code.text`: NFKC, control characters and whitespace runs → one space, trimmed,
 * case-folded. Depends on the text alone, so it is the same in every run.
 */
export function textKey(text: string): string {
  return plainText(text.normalize('NFKC'), 10_000).toLowerCase();
}

/** Spellings of one text key kept for the dictionary. */
const MAX_SPELLINGS = 20;

/** A text as one visible line: JSON string escapes (`\n`, `\t`, `\u0007`…), bounded. */
function visibleText(s: string): string {
  const v = JSON.stringify(s)
    .slice(1, -1)
    .replace(/[\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return v.length > 200 ? `${v.slice(0, 199)}…` : v;
}

/** The instrument of an observation: its coding, else its `code.text`; undefined when it has neither. */
export function instrumentOf(o: Obj): Instrument | undefined {
  const code = isObj(o.code) ? o.code : undefined;
  const codings = Array.isArray(code?.coding) ? code.coding.filter(isObj) : [];
  const loinc = codings.find((c) => c.system === LOINC && str(c.code));
  const chosen = loinc ?? codings.find((c) => str(c.code));
  if (!chosen) {
    // A server following the spec: `code` carries only `text`.
    const text = str(code?.text);
    const key = text === undefined ? '' : textKey(text);
    if (key === '') return undefined;
    return { key: `text|${key}`, name: headerSafe(plainText(text!.normalize('NFKC'))), texts: [visibleText(text!)] };
  }
  const c = String(chosen.code);
  const system = str(chosen.system);
  const display = str(chosen.display) ? plainText(chosen.display as string) : undefined;
  if (loinc) {
    const short = KNOWN_INSTRUMENTS[c];
    return { key: `${LOINC}|${c}`, system: LOINC, code: c, display, name: short ? `${short} (${c})` : `LOINC ${plainText(c, 40)}` };
  }
  return { key: `${system ?? ''}|${c}`, system, code: c, display, name: headerSafe(`${plainText(c, 40)} (${system ? plainText(system, 100) : 'no system'})`) };
}

const PARTIAL_DATE = /^\d{4}(-\d{2}(-\d{2})?)?$/;
const WITH_ZONE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;

/** Effective time of an observation: its text and epoch ms (NaN when unreadable). */
function effectiveOf(o: Obj): string | undefined {
  return str(o.effectiveDateTime) ?? str(o.effectiveInstant) ?? (isObj(o.effectivePeriod) ? str(o.effectivePeriod.start) : undefined);
}

/** The UTC day of an effective date(-time), as described in the header; '' when unreadable. */
export function utcDay(effective: string | undefined): string {
  if (!effective) return '';
  if (PARTIAL_DATE.test(effective)) return effective;
  if (WITH_ZONE.test(effective)) {
    const ms = Date.parse(effective);
    if (!Number.isNaN(ms)) return new Date(ms).toISOString().slice(0, 10);
  }
  if (/^\d{4}-\d{2}-\d{2}T/.test(effective)) return effective.slice(0, 10);
  return '';
}

export interface WideInput {
  /** Grouping key and written `patient_id` (server id, or its pseudonym). */
  patientId: string;
  /** Written `patient_source_key` (or its pseudonym); undefined when unknown. */
  sourceKey?: string;
  /** The observation the columns read (pseudonymised under `--pseudonymize`). */
  observation: Obj;
}

const STALE_PREFIX = '.export-wide-';

type SpooledInstrument = Instrument & { index: number; spellings: Set<string>; more: boolean };

/** Another spelling of a text key: kept (up to MAX_SPELLINGS) for the header and the dictionary. */
function mergeSpelling(known: SpooledInstrument, inst: Instrument): void {
  if (inst.name < known.name) known.name = inst.name; // the header: the smallest spelling, whatever the order
  const spelling = inst.texts![0]!;
  if (known.spellings.has(spelling)) return;
  if (known.spellings.size < MAX_SPELLINGS) known.spellings.add(spelling);
  else {
    known.more = true;
    // The kept ones stay the smallest, whatever the order.
    const largest = [...known.spellings].sort().pop()!;
    if (spelling < largest) {
      known.spellings.delete(largest);
      known.spellings.add(spelling);
    }
  }
}

/** Removes spool folders of processes that no longer exist (a wide export killed with SIGKILL). */
function removeStale(dir: string): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const n of names) {
    const m = /^\.export-wide-(\d+)-/.exec(n);
    if (!m) continue;
    const pid = Number(m[1]);
    if (pid === process.pid) continue;
    try {
      process.kill(pid, 0);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ESRCH') rmSync(join(dir, n), { recursive: true, force: true });
    }
  }
}

export class WideSpool {
  readonly dir: string;
  readonly #db: Database.Database;
  readonly #insert: Database.Statement;
  readonly #instruments = new Map<string, SpooledInstrument>();
  readonly #names: ColumnNameStyle;
  #named?: Instrument[];
  #seq = 0;
  #inTx = 0;
  #closed = false;
  /** Observations spooled. */
  spooled = 0;
  /** Observations left out: no Patient subject, or no coded instrument. */
  unplaced = 0;

  private constructor(dir: string, db: Database.Database, names: ColumnNameStyle) {
    this.dir = dir;
    this.#db = db;
    this.#names = names;
    db.exec(`CREATE TABLE spool (
      patient TEXT NOT NULL, day TEXT NOT NULL, inst INTEGER NOT NULL, eff REAL NOT NULL, upd REAL NOT NULL, seq INTEGER NOT NULL,
      source_key TEXT, last_updated TEXT, value TEXT,
      PRIMARY KEY (patient, day, inst, eff, upd, seq)
    ) WITHOUT ROWID`);
    this.#insert = db.prepare('INSERT INTO spool VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)');
  }

  /** A new spool in a private folder under `parent` (created 0700 when missing); `names`: the column name style. */
  static open(parent: string, names: ColumnNameStyle = 'original'): WideSpool {
    removeStale(parent);
    const { dir, db } = openScratchDatabase(parent, `${STALE_PREFIX}${process.pid}-`, 'spool.db');
    try {
      db.pragma('temp_store = FILE');
      return new WideSpool(dir, db, names);
    } catch (err) {
      db.close();
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
  }

  /** Spools one observation (false: left out, counted in `unplaced`). */
  add(input: WideInput): boolean {
    const o = input.observation;
    const inst = instrumentOf(o);
    if (!inst || input.patientId === '') {
      this.unplaced++;
      return false;
    }
    let known = this.#instruments.get(inst.key);
    if (!known) {
      if (this.#instruments.size >= MAX_WIDE_INSTRUMENTS) {
        throw new CareEtlError(`The wide layout found more than ${MAX_WIDE_INSTRUMENTS} distinct instruments (questionnaire codes): too many columns`, {
          exitCode: ExitCode.config,
          hint: 'Use the long layout (the default), or filter the export (e.g. `--query` for a server that supports code filters).',
        });
      }
      known = { ...inst, index: this.#instruments.size, spellings: new Set(inst.texts), more: false };
      this.#instruments.set(inst.key, known);
      this.#named = undefined;
    } else if (inst.texts) mergeSpelling(known, inst);
    const effective = effectiveOf(o);
    const effMs = effective ? Date.parse(effective) : NaN; // date-only forms parse as UTC
    const meta = isObj(o.meta) ? o.meta : {};
    const lastUpdated = str(meta.lastUpdated);
    const updMs = lastUpdated ? Date.parse(lastUpdated) : NaN;
    const { value } = observationValue(o);
    if (this.#inTx === 0) this.#db.exec('BEGIN');
    this.#insert.run(
      input.patientId,
      utcDay(effective),
      known.index,
      Number.isNaN(effMs) ? -1 : effMs,
      Number.isNaN(updMs) ? -1 : updMs,
      this.#seq++,
      input.sourceKey ?? null,
      lastUpdated ?? null,
      value === undefined ? null : JSON.stringify(value),
    );
    if (++this.#inTx >= 5000) this.flush();
    this.spooled++;
    return true;
  }

  /** Commits the rows spooled so far (the caller does it once per page). */
  flush(): void {
    if (this.#inTx > 0) {
      this.#db.exec('COMMIT');
      this.#inTx = 0;
    }
  }

  /**
   * The instrument columns, sorted by header (ties: by key), named once the spool is complete (a text column by its
   * smallest spelling): a header taken twice (or equal to a fixed column) suffixed from its key, so the names do not
   * depend on the order the observations came in; then `--column-names`.
   */
  instruments(): Instrument[] {
    if (this.#named) return this.#named;
    const all = [...this.#instruments.values()].map(({ index: _i, spellings, more, ...rest }) => {
      const texts = spellings.size ? [...[...spellings].sort(), ...(more ? ['…'] : [])] : undefined;
      return { ...rest, ...(texts ? { texts } : {}) };
    });
    all.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const taken = new Set<string>([...WIDE_KEY_COLUMNS, ...WIDE_TAIL_COLUMNS]);
    for (const inst of all) {
      if (taken.has(inst.name)) inst.name = `${inst.name} #${createHash('sha256').update(inst.key).digest('hex').slice(0, 8)}`;
      taken.add(inst.name);
    }
    // The fixed columns first, so that an instrument whose snake name equals one of them is the one suffixed.
    const fixed = [...WIDE_KEY_COLUMNS, ...WIDE_TAIL_COLUMNS];
    const names = outputNames([...fixed, ...all.map((i) => i.name)], this.#names).slice(fixed.length);
    this.#named = all.map((i, n) => (names[n] === i.name ? i : { ...i, name: names[n]!, label: i.name }));
    return this.#named;
  }

  /** Text-keyed columns that merged several spellings (case, spaces, line breaks): the export warns about them. */
  mergedTexts(): number {
    return [...this.#instruments.values()].filter((i) => i.spellings.size > 1).length;
  }

  columns(): string[] {
    return [...WIDE_KEY_COLUMNS, ...this.instruments().map((i) => i.name), ...WIDE_TAIL_COLUMNS];
  }

  /** The wide rows, in (patient, day) order, built one at a time from the sorted spool. */
  *rows(): Generator<Record<string, unknown>> {
    this.flush();
    const names = new Map<number, string>();
    const named = new Map(this.instruments().map((i) => [i.key, i.name]));
    for (const i of this.#instruments.values()) names.set(i.index, named.get(i.key)!);
    type R = { patient: string; day: string; inst: number; source_key: string | null; last_updated: string | null; upd: number; value: string | null };
    const it = this.#db
      .prepare('SELECT patient, day, inst, upd, source_key, last_updated, value FROM spool ORDER BY patient, day, inst, eff, upd, seq')
      .iterate() as IterableIterator<R>;
    let row: Record<string, unknown> | undefined;
    let key: string | undefined;
    let shown = 0;
    let maxUpd = -Infinity;
    const done = (r: Record<string, unknown>) => {
      r.superseded = (r.observations as number) - shown;
      return r;
    };
    for (const r of it) {
      const k = `${r.patient}\u0000${r.day}`;
      if (k !== key) {
        if (row) yield done(row);
        key = k;
        row = { patient_id: r.patient, patient_source_key: r.source_key ?? undefined, date: r.day === '' ? undefined : r.day, observations: 0 };
        shown = 0;
        maxUpd = -Infinity;
      }
      const name = names.get(r.inst)!;
      if (!(name in row!)) shown++;
      row![name] = r.value === null ? undefined : JSON.parse(r.value);
      row!.observations = (row!.observations as number) + 1;
      if (row!.patient_source_key === undefined && r.source_key !== null) row!.patient_source_key = r.source_key;
      if (r.last_updated !== null && r.upd >= maxUpd) {
        maxUpd = r.upd;
        row!.last_updated = r.last_updated;
      }
    }
    if (row) yield done(row);
  }

  /** Closes the database and removes the folder (idempotent). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#db.close();
    } finally {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}
