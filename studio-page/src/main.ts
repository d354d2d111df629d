// The studio page: edit the mapping on the left, see every row's outcome on the right, re-evaluated on each edit.
import type { EditorView } from '@codemirror/view';
import { ApiError, readToken, studioApi } from './api.js';
import { byId } from './dom.js';
import { createEditor, goTo, showDiagnostics } from './editor.js';
import { renderDetail, renderProblems, renderResources, renderRows, renderTotals } from './results.js';
import type { Evaluation, EvaluateRequest } from './types.js';

/** JSONata's built-ins and care-etl's function library, by name: put in by scripts/build-studio.mjs from src/mapping/functions.ts. */
declare const __STUDIO_FUNCTIONS__: string[];

/** Re-evaluation after the last keystroke: short enough to feel live, long enough not to evaluate every key. */
const EDIT_DEBOUNCE_MS = 150;
const PAGE_SIZE = 50;

const api = studioApi(readToken());

const ui = {
  resource: undefined as string | undefined,
  offset: 0,
  search: '',
  sampleSize: undefined as number | undefined,
  line: undefined as number | undefined,
  selected: undefined as number | undefined,
  evaluation: undefined as Evaluation | undefined,
  /** Columns per source name, as the rows of the last evaluations showed them (for completion and highlighting). */
  columns: new Map<string, string[]>(),
  baseHash: '',
  savedText: '',
};

let view: EditorView;
let timer: ReturnType<typeof setTimeout> | undefined;
/** An evaluation is scheduled but not sent yet: the results are not "idle" even if an older answer arrives. */
let timerPending = false;
let inFlight: AbortController | undefined;

function setStatus(id: 'save-state' | 'eval-state', text: string, kind = ''): void {
  const el = byId(id);
  el.textContent = text;
  el.className = `status ${kind}`;
}

function markDirty(): void {
  const dirty = view.state.doc.toString() !== ui.savedText;
  document.title = `${dirty ? '● ' : ''}care-etl studio`;
  byId<HTMLButtonElement>('save').disabled = !dirty;
  if (dirty) setStatus('save-state', 'unsaved changes');
}

function schedule(delayMs: number): void {
  clearTimeout(timer);
  byId('results').dataset.state = 'pending';
  timerPending = true;
  timer = setTimeout(() => {
    timerPending = false;
    void evaluate();
  }, delayMs);
}

async function evaluate(): Promise<void> {
  inFlight?.abort();
  const controller = (inFlight = new AbortController());
  const text = view.state.doc.toString();
  const req: EvaluateRequest = {
    text,
    resource: ui.resource,
    offset: ui.offset,
    limit: PAGE_SIZE,
    search: ui.search || undefined,
    line: ui.line,
    sampleSize: ui.sampleSize,
  };
  setStatus('eval-state', 'evaluating…');
  try {
    const ev = await api.evaluate(req, controller.signal);
    if (controller.signal.aborted || view.state.doc.toString() !== text) return; // a newer evaluation is on its way
    ui.line = undefined;
    show(ev);
    if (!ev.errors.length) void learnColumns(ev, text);
    setStatus('eval-state', `evaluated in ${Math.round(ev.elapsedMs)} ms`);
  } catch (err) {
    if (controller.signal.aborted) return;
    setStatus('eval-state', `evaluation failed: ${err instanceof Error ? err.message : String(err)}`, 'error');
  } finally {
    if (inFlight === controller && !timerPending) byId('results').dataset.state = 'idle';
  }
}

/**
 * Once, after the first answer: one row of each other resource mapping, to learn its source's columns for completion
 * (the page otherwise knows only the columns of the resources it has shown).
 */
let columnsLearned = false;
async function learnColumns(ev: Evaluation, text: string): Promise<void> {
  if (columnsLearned) return;
  columnsLearned = true;
  for (const r of ev.resources) {
    if (ui.columns.has(r.source)) continue;
    const one = await api.evaluate({ text, resource: r.name, limit: 1 }).catch(() => undefined);
    if (one?.rows.length) ui.columns.set(r.source, Object.keys(one.rows[0]!.input));
  }
}

function show(ev: Evaluation): void {
  ui.evaluation = ev;
  ui.resource = ev.resource ?? undefined;
  ui.offset = ev.page.offset;
  const info = ev.resources.find((r) => r.name === ev.resource);
  if (info && ev.rows.length) ui.columns.set(info.source, Object.keys(ev.rows[0]!.input));
  if (!ev.rows.some((r) => r.index === ui.selected)) {
    ui.selected = ev.rows[0]?.index;
    byId('test-case-result').textContent = '';
  }
  showDiagnostics(view, ev.errors);
  renderProblems(ev.errors, (d) => goTo(view, d.line, d.column));
  renderResources(ev.resources, ev.resource);
  renderTotals(ev.totals, ev.elapsedMs, ev.errors.filter((e) => e.severity === 'error').length);
  renderRows(ev, ui.selected, select);
  renderDetail(selectedRow());
}

const selectedRow = () => ui.evaluation?.rows.find((r) => r.index === ui.selected);

function select(index: number): void {
  ui.selected = index;
  for (const tr of byId('rows').querySelectorAll('tr[data-index]'))
    tr.setAttribute('aria-selected', String(Number((tr as HTMLElement).dataset.index) === index));
  renderDetail(selectedRow());
  byId('test-case-result').textContent = '';
}

async function save(overwrite = false): Promise<void> {
  const text = view.state.doc.toString();
  setStatus('save-state', 'saving…');
  try {
    const res = await api.save(text, ui.baseHash);
    ui.baseHash = res.hash;
    ui.savedText = text;
    byId('conflict').hidden = true;
    markDirty();
    setStatus('save-state', overwrite ? 'saved (overwrote the file on disk)' : 'saved', 'ok');
  } catch (err) {
    if (err instanceof ApiError && err.status === 409) {
      // Someone changed the file since it was read: offer to reload it or to overwrite it (the next save uses its hash).
      byId('conflict').hidden = false;
      byId('conflict').dataset.hash = typeof err.body.hash === 'string' ? err.body.hash : '';
      setStatus('save-state', 'not saved: the file changed on disk', 'error');
      return;
    }
    setStatus('save-state', `not saved: ${err instanceof Error ? err.message : String(err)}`, 'error');
  }
}

async function reloadFromDisk(): Promise<void> {
  const file = await api.mapping();
  ui.baseHash = file.hash;
  ui.savedText = file.text;
  view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: file.text } });
  byId('conflict').hidden = true;
  markDirty();
  setStatus('save-state', 'reloaded from disk', 'ok');
}

async function addTestCase(): Promise<void> {
  const row = selectedRow();
  if (!row || !ui.resource) return;
  const out = byId('test-case-result');
  out.textContent = 'adding…';
  try {
    const res = await api.addTestCase(view.state.doc.toString(), ui.resource, row.index);
    const unsaved = view.state.doc.toString() !== ui.savedText ? ' — save the mapping too: `care-etl test` reads the file' : '';
    out.textContent = `added “${res.name}” to ${res.file}${unsaved}`;
  } catch (err) {
    out.textContent = `not added: ${err instanceof Error ? err.message : String(err)}`;
  }
}

function wireControls(): void {
  byId('save').addEventListener('click', () => void save());
  byId('reload').addEventListener('click', () => void reloadFromDisk());
  byId('overwrite').addEventListener('click', () => {
    ui.baseHash = byId('conflict').dataset.hash ?? ui.baseHash;
    void save(true);
  });
  byId('add-test-case').addEventListener('click', () => void addTestCase());
  byId<HTMLSelectElement>('resource').addEventListener('change', (e) => {
    ui.resource = (e.target as HTMLSelectElement).value;
    ui.offset = 0;
    ui.selected = undefined;
    schedule(0);
  });
  byId<HTMLInputElement>('search').addEventListener('input', (e) => {
    ui.search = (e.target as HTMLInputElement).value.trim();
    ui.offset = 0;
    schedule(EDIT_DEBOUNCE_MS);
  });
  byId<HTMLFormElement>('jump').addEventListener('submit', (e) => {
    e.preventDefault();
    const line = Number(byId<HTMLInputElement>('jump-line').value);
    if (!Number.isInteger(line) || line < 1) return;
    ui.line = line;
    ui.selected = undefined;
    schedule(0);
  });
  byId<HTMLInputElement>('sample-size').addEventListener('change', (e) => {
    const size = Number((e.target as HTMLInputElement).value);
    if (!Number.isInteger(size) || size < 1) return;
    ui.sampleSize = size;
    schedule(0);
  });
  const page = (delta: number) => () => {
    ui.offset = Math.max(0, ui.offset + delta);
    ui.selected = undefined;
    schedule(0);
  };
  byId('prev').addEventListener('click', page(-PAGE_SIZE));
  byId('next').addEventListener('click', page(PAGE_SIZE));
  addEventListener('beforeunload', (e) => {
    if (view.state.doc.toString() !== ui.savedText) e.preventDefault();
  });
}

async function start(): Promise<void> {
  let file;
  try {
    file = await api.mapping();
  } catch (err) {
    const why = err instanceof ApiError && err.status === 401 ? 'open the URL `care-etl studio` printed (it carries the token)' : String(err);
    setStatus('eval-state', `cannot read the mapping: ${why}`, 'error');
    return;
  }
  ui.baseHash = file.hash;
  ui.savedText = file.text;
  byId('mapping-path').textContent = file.path;
  byId('test-file').textContent = file.testFile;
  byId<HTMLInputElement>('sample-size').value = String(file.sampleSize);
  const allColumns = () => new Set([...ui.columns.values()].flat());
  view = createEditor({
    parent: byId('editor'),
    text: file.text,
    functions: __STUDIO_FUNCTIONS__,
    columnsOf: (source) => (source && ui.columns.get(source)) || [...allColumns()],
    knownColumns: allColumns,
    onChange: () => {
      markDirty();
      schedule(EDIT_DEBOUNCE_MS);
    },
    onSave: () => void save(),
  });
  wireControls();
  markDirty();
  setStatus('save-state', 'saved', 'ok');
  schedule(0);
}

void start();
