// The results side: the resource picker, the totals, one page of rows and the selected row's details.
import { byId, h, pretty } from './dom.js';
import type { Diag, Evaluation, ResourceInfo, RowResult, Totals } from './types.js';

const fmt = (n: number) => n.toLocaleString('en-US');

/** `current` null: the mapping did not compile (no resource evaluated). */
export function renderResources(resources: ResourceInfo[], current: string | null): void {
  const select = byId<HTMLSelectElement>('resource');
  const options = resources.map((r) =>
    h(
      'option',
      { value: r.name, selected: r.name === current },
      `${r.name} — ${r.type} from ${r.source}${r.rows === undefined ? '' : ` (${fmt(r.rows)} rows)`}`,
    ),
  );
  select.replaceChildren(...options);
  select.value = current ?? '';
}

/** `errorCount`: mapping errors — with rows (a column contract error) a run would still stop before sending anything. */
export function renderTotals(t: Totals, elapsedMs: number, errorCount: number): void {
  const totals = byId('totals');
  const errors = errorCount ? h('span', { class: 'rejected' }, `${errorCount} mapping error${errorCount > 1 ? 's' : ''}: `) : '';
  if (errorCount && t.sampled === 0) {
    totals.replaceChildren(errors, 'fix them to see the rows.');
    return;
  }
  totals.replaceChildren(
    errors,
    errorCount ? 'a run would stop before sending anything; over the sample ' : '',
    `${fmt(t.sampled)} rows sampled: `,
    h('span', { class: 'loaded', 'data-testid': 'total-loaded' }, `${fmt(t.loaded)} loaded`),
    ' · ',
    h('span', { class: 'rejected', 'data-testid': 'total-rejected' }, `${fmt(t.rejected)} rejected`),
    ' · ',
    h('span', { class: 'skipped', 'data-testid': 'total-skipped' }, `${fmt(t.skipped)} skipped`),
    h('span', { class: 'elapsed' }, ` (${fmt(Math.round(elapsedMs))} ms)`),
  );
}

export function renderRows(ev: Evaluation, selected: number | undefined, onSelect: (index: number) => void): void {
  const body = byId('rows');
  body.replaceChildren(
    ...ev.rows.map((row) => {
      const tr = h(
        'tr',
        { tabindex: 0, 'data-testid': 'row', 'data-index': row.index, 'aria-selected': row.index === selected ? 'true' : 'false', class: row.status },
        h('td', { class: 'num' }, row.line),
        h('td', {}, row.key),
        h('td', { class: 'status' }, row.status),
      );
      tr.addEventListener('click', () => onSelect(row.index));
      tr.addEventListener('keydown', (e) => {
        const next = e.key === 'ArrowDown' ? tr.nextElementSibling : e.key === 'ArrowUp' ? tr.previousElementSibling : null;
        const target = e.key === 'Enter' || e.key === ' ' ? tr : next;
        if (!(target instanceof HTMLElement) || target.dataset.index === undefined) return;
        e.preventDefault();
        target.focus();
        onSelect(Number(target.dataset.index));
      });
      return tr;
    }),
  );
  if (ev.rows.length === 0) body.append(h('tr', {}, h('td', { colspan: 3, class: 'empty' }, ev.errors.length ? '—' : 'No rows on this page.')));
  const { offset, total } = ev.page;
  byId('page-info').textContent = total ? `${fmt(offset + 1)}–${fmt(offset + ev.rows.length)} of ${fmt(total)}` : '0 rows';
  byId<HTMLButtonElement>('prev').disabled = offset <= 0;
  byId<HTMLButtonElement>('next').disabled = offset + ev.rows.length >= total;
}

function section(title: string, testid: string, ...content: (Node | string)[]): HTMLElement {
  return h('section', { class: 'detail-part', 'data-testid': testid }, h('h3', {}, title), ...content);
}

export function renderDetail(row: RowResult | undefined): void {
  const detail = byId('detail');
  const addButton = byId<HTMLButtonElement>('add-test-case');
  addButton.disabled = !row;
  if (!row) {
    byId('detail-title').textContent = 'No row selected';
    detail.replaceChildren();
    return;
  }
  byId('detail-title').textContent = `Row ${fmt(row.index + 1)} · line ${fmt(row.line)} · key ${row.key || '—'} · ${row.status}`;
  const parts: HTMLElement[] = [];
  if (row.reason) parts.push(section(row.status === 'skipped' ? 'Skipped' : 'Rejected', 'row-reason', h('p', { class: row.status }, row.reason)));
  if (row.issues.length)
    parts.push(section('Validation issues', 'row-issues', h('ul', {}, ...row.issues.map((i) => h('li', {}, h('code', {}, i.path || '/'), ' ', i.message)))));
  parts.push(section('Mapped resource', 'row-resource', h('pre', {}, row.resource ? pretty(row.resource) : '(none)')));
  if (row.refs.length)
    parts.push(
      section(
        '$refs (stubbed as care-etl test does)',
        'row-refs',
        h(
          'table',
          {},
          h('thead', {}, h('tr', {}, h('th', {}, 'path'), h('th', {}, 'target'), h('th', {}, 'key'), h('th', {}, 'resolves to'))),
          h('tbody', {}, ...row.refs.map((r) => h('tr', {}, h('td', {}, r.path), h('td', {}, r.target), h('td', {}, r.key), h('td', {}, r.resolvesTo)))),
        ),
      ),
    );
  parts.push(section('Input row', 'row-input', h('pre', {}, pretty(row.input))));
  detail.replaceChildren(...parts);
}

/** The problems list under the editor; a click moves the cursor there. */
export function renderProblems(errors: Diag[], onPick: (d: Diag) => void): void {
  byId('problem-count').textContent = errors.length ? `(${errors.length})` : '';
  const list = byId('problems');
  list.replaceChildren(
    ...errors.map((d) => {
      const button = h(
        'button',
        { type: 'button', class: `problem ${d.severity}` },
        h('span', { class: 'where' }, `${d.line}:${d.column}`),
        ' ',
        h('span', { class: 'code' }, d.code),
        ' ',
        d.message,
      );
      button.addEventListener('click', () => onPick(d));
      return h('li', { 'data-testid': 'problem', 'data-line': d.line, 'data-column': d.column, 'data-severity': d.severity }, button);
    }),
  );
  if (!errors.length) list.append(h('li', { class: 'none' }, 'No problems.'));
}
