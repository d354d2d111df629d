/**
 * `$TODO("…")` markers: the decisions `care-etl init` leaves in a mapping. Found by walking every string value
 * of the YAML document and scanning it as JSONata text (comments and string literals skipped), so that
 * `init`'s count and `validate`'s `todo` issues come from this one function and always agree. A marker is
 * found wherever it stands — an expression (`map`, `key`, `groupBy`), a source's `records`, a resource's
 * `type`, a lookup label — even where the file fails its schema, so `validate` reports them all in one pass.
 */
import { LineCounter, isMap, isPair, isScalar, isSeq, parseDocument, type Node } from 'yaml';
import { issue, type Issue, type Location } from '../core/issues.js';
import { YamlLocator, toPointer, type DocPath } from './yaml-positions.js';

interface TodoCall {
  /** Offset of `$TODO` in the scanned string. */
  offset: number;
  /** Length of the whole call, `$TODO(` to `)`. */
  length: number;
  /** The text of its string argument (the question to answer); `''` when it has none. */
  text: string;
}

export interface TodoMarker extends TodoCall {
  path: DocPath;
  /** JSON pointer of the YAML value holding the marker, e.g. `/resources/0/map`. */
  pointer: string;
  location: Location;
  /** The value is nothing but the marker (`type: '$TODO("…")'`): every other problem of that value is the marker's. */
  whole: boolean;
  /** What holds the marker, for messages: "mapping `patient` map", "source `visits` records". */
  owner: string;
}

const isNamePart = (c: string | undefined) => c !== undefined && /[A-Za-z0-9_$]/.test(c);

/** End (exclusive) of the quoted string starting at `i` (JSONata strings: `"…"` or `'…'`, backslash escapes). */
function stringEnd(s: string, i: number): number {
  const q = s[i];
  let j = i + 1;
  while (j < s.length && s[j] !== q) j += s[j] === '\\' ? 2 : 1;
  return Math.min(j + 1, s.length);
}

const ESCAPES: Record<string, string> = { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

function unquote(lit: string): string {
  const body = lit.slice(1, lit.endsWith(lit[0]!) && lit.length > 1 ? -1 : undefined);
  return body.replace(/\\(u[0-9a-fA-F]{4}|.)/g, (_, e: string) => (e.length === 5 ? String.fromCharCode(parseInt(e.slice(1), 16)) : (ESCAPES[e] ?? e)));
}

/** Every `$TODO(…)` call in a string read as JSONata: not in `/* *\/` comments, string literals or `` `names` ``. */
export function scanTodoCalls(s: string): TodoCall[] {
  const calls: TodoCall[] = [];
  let i = 0;
  while (i < s.length) {
    const c = s[i]!;
    if (c === '/' && s[i + 1] === '*') {
      const end = s.indexOf('*/', i + 2);
      i = end < 0 ? s.length : end + 2;
    } else if (c === '"' || c === "'") {
      i = stringEnd(s, i);
    } else if (c === '`') {
      const end = s.indexOf('`', i + 1);
      i = end < 0 ? s.length : end + 1;
    } else if (c === '$' && s.startsWith('$TODO', i) && !isNamePart(s[i + 5]) && !isNamePart(s[i - 1])) {
      let j = i + 5;
      while (/\s/.test(s[j] ?? '')) j++;
      if (s[j] !== '(') {
        i = j;
        continue;
      }
      // The argument: its first string literal is the question; the call ends at the matching `)`.
      let depth = 0;
      let text: string | undefined;
      let k = j;
      for (; k < s.length; k++) {
        const d = s[k]!;
        if (d === '"' || d === "'") {
          const end = stringEnd(s, k);
          text ??= unquote(s.slice(k, end));
          k = end - 1;
        } else if (d === '(') depth++;
        else if (d === ')' && --depth === 0) break;
      }
      const end = Math.min(k + 1, s.length);
      calls.push({ offset: i, length: end - i, text: text ?? s.slice(j + 1, end - 1).trim() });
      i = end;
    } else {
      i++;
    }
  }
  return calls;
}

function ownerOf(path: DocPath, name: (p: DocPath) => unknown): string {
  const [top, a, b, ...rest] = path;
  const tail = (segs: (string | number | undefined)[]) => segs.filter((x) => x !== undefined).join('.');
  if (top === 'resources' && typeof a === 'number') {
    const n = name(['resources', a, 'name']);
    return `mapping ${typeof n === 'string' ? `\`${n}\`` : `resources[${a}]`}${b !== undefined ? ` ${tail([b, ...rest])}` : ''}`;
  }
  if (top === 'sources' && a !== undefined) return `source \`${a}\`${b !== undefined ? ` ${tail([b, ...rest])}` : ''}`;
  if (top === 'lookups' && a !== undefined) return `lookup \`${a}\`${b !== undefined ? ` code \`${tail([b, ...rest])}\`` : ''}`;
  if (top === 'exports' && a !== undefined) return `export \`${a}\`${b !== undefined ? ` ${tail([b, ...rest])}` : ''}`;
  return toPointer(path) || 'the file';
}

/**
 * The markers of a mapping file's text, in file order. A file that is not YAML has none that can be placed
 * (its YAML errors are reported by the loader).
 */
export function findTodoMarkers(text: string, file: string): TodoMarker[] {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: false });
  if (doc.errors.length) return [];
  const loc = new YamlLocator(file, text, doc, lineCounter);
  const markers: TodoMarker[] = [];
  const walk = (node: unknown, path: (string | number)[]): void => {
    if (isMap(node)) {
      for (const pair of node.items) {
        if (!isPair(pair)) continue;
        const k = pair.key as Node | null;
        walk(pair.value, [...path, String(isScalar(k) ? k.value : k)]);
      }
    } else if (isSeq(node)) {
      node.items.forEach((item, i) => walk(item, [...path, i]));
    } else if (isScalar(node) && typeof node.value === 'string') {
      const value = node.value;
      for (const call of scanTodoCalls(value)) {
        markers.push({
          ...call,
          path,
          pointer: toPointer(path),
          location: loc.positionOf(path, call.offset) ?? { file },
          whole: value.trim().length === call.length,
          owner: ownerOf(path, (p) => {
            const n = loc.find(p)?.node;
            return isScalar(n) ? n.value : undefined;
          }),
        });
      }
    }
  };
  walk(doc.contents, []);
  return markers;
}

/** One marker as a `validate` issue: what holds it, the question, where. */
export function todoIssue(m: TodoMarker): Issue {
  return issue.error('todo', `${m.owner}: TODO — ${m.text || '(no text: see the comment beside it)'}`, { path: m.pointer, location: m.location });
}

export const TODO_HINT =
  'Each `$TODO("…")` is a decision `care-etl init` left to you: replace it with the value or expression its text asks for, or delete the field (or resource) it stands in; then validate again.';
