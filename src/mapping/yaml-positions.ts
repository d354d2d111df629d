/**
 * Line/column bookkeeping for the mapping file: find the YAML node of a document path and translate an
 * offset inside a scalar's *value* (e.g. a JSONata error position) into the exact source character.
 */
import { isMap, isPair, isScalar, isSeq, type Document, type LineCounter, type Node, type Scalar } from 'yaml';
import type { Location } from '../core/issues.js';

export type DocPath = readonly (string | number)[];

/** JSON pointer of a document path (`['resources', 0, 'map']` → `/resources/0/map`). */
export function toPointer(path: DocPath): string {
  return path.length ? `/${path.map((s) => String(s).replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}` : '';
}

interface Found {
  node?: Node;
  /** The key scalar when the last segment is a map key. */
  keyNode?: Node;
}

function rangeStart(n: Node | undefined): number | undefined {
  return n?.range ? n.range[0] : undefined;
}

export class YamlLocator {
  constructor(
    readonly file: string,
    readonly text: string,
    readonly doc: Document,
    readonly lineCounter: LineCounter,
  ) {}

  /** Walks the node tree; map keys are compared as text (`1:` matches segment "1"). */
  find(path: DocPath): Found | undefined {
    let cur: unknown = this.doc.contents;
    let keyNode: Node | undefined;
    for (const seg of path) {
      keyNode = undefined;
      if (isMap(cur)) {
        const pair = cur.items.find((p) => isPair(p) && String(isScalar(p.key) ? p.key.value : p.key) === String(seg));
        if (!pair) return undefined;
        keyNode = (pair.key as Node | null) ?? undefined;
        cur = pair.value;
      } else if (isSeq(cur)) {
        const i = typeof seg === 'number' ? seg : Number(seg);
        if (!Number.isInteger(i) || i < 0 || i >= cur.items.length) return undefined;
        cur = cur.items[i];
      } else {
        return undefined;
      }
    }
    return { node: (cur as Node | null) ?? undefined, keyNode };
  }

  locationAt(offset: number): Location {
    const { line, col } = this.lineCounter.linePos(Math.max(0, Math.min(offset, this.text.length)));
    return { file: this.file, line, column: col };
  }

  /**
   * The node at `path`, or the closest existing ancestor. With `offset` and a scalar node: the character
   * `offset` of its value.
   */
  positionOf(path: DocPath, offset?: number): Location | undefined {
    for (let n = path.length; n >= 0; n--) {
      const found = this.find(path.slice(0, n));
      if (!found) continue;
      const node = found.node;
      if (n === path.length && offset !== undefined && isScalar(node)) {
        const src = scalarSourceOffset(this.text, node, offset);
        if (src !== undefined) return this.locationAt(src);
      }
      const start = rangeStart(node) ?? rangeStart(found.keyNode);
      if (start !== undefined) return this.locationAt(start);
    }
    return undefined;
  }

  /** Location of the key of the property at `path` (falls back to the value / ancestor). */
  keyPositionOf(path: DocPath): Location | undefined {
    const found = this.find(path);
    const start = rangeStart(found?.keyNode);
    return start !== undefined ? this.locationAt(start) : this.positionOf(path);
  }

  /** The original text of a scalar (e.g. `01` for a key YAML read as the number 1). */
  sourceOf(node: Node | undefined): string | undefined {
    if (!node?.range) return undefined;
    return this.text.slice(node.range[0], node.range[1]);
  }
}

const ESCAPE_LENGTH: Record<string, number> = { x: 4, u: 6, U: 10 };

/**
 * Maps character `offset` of a scalar's string value to an offset in the YAML source.
 * - block literal (`|`): value line k is source line k after the header; the indentation is the
 *   difference of the line lengths (exact, whatever the indentation of nested JSONata lines);
 * - everything else (plain, quoted, folded, multi-line flow scalars): the value characters are aligned
 *   with the source characters, skipping indentation / line folds / `''` / backslash escapes.
 * Returns undefined when the alignment fails (caller falls back to the node start).
 */
export function scalarSourceOffset(text: string, node: Scalar, offset: number): number | undefined {
  if (!node.range) return undefined;
  const value = typeof node.value === 'string' ? node.value : String(node.value);
  const [start, valueEnd] = node.range;
  if (value.length === 0) return start;
  const off = Math.max(0, Math.min(offset, value.length - 1));

  if (node.type === 'BLOCK_LITERAL') {
    const headerEnd = text.indexOf('\n', start);
    if (headerEnd < 0) return undefined;
    const before = value.slice(0, off);
    const k = before.split('\n').length - 1;
    const col = off - (before.lastIndexOf('\n') + 1);
    const valueLine = value.split('\n')[k] ?? '';
    let lineStart = headerEnd + 1;
    for (let i = 0; i < k; i++) {
      const nl = text.indexOf('\n', lineStart);
      if (nl < 0) return undefined;
      lineStart = nl + 1;
    }
    let lineEnd = text.indexOf('\n', lineStart);
    if (lineEnd < 0) lineEnd = text.length;
    if (text[lineEnd - 1] === '\r') lineEnd--;
    const srcLine = text.slice(lineStart, lineEnd);
    const indent = valueLine.length > 0 ? srcLine.length - valueLine.length : Math.min(srcLine.length, col);
    if (indent < 0) return undefined;
    return lineStart + indent + col;
  }

  let p: number;
  if (node.type === 'BLOCK_FOLDED') {
    const headerEnd = text.indexOf('\n', start);
    if (headerEnd < 0) return undefined;
    p = headerEnd + 1;
  } else if (node.type === 'QUOTE_DOUBLE' || node.type === 'QUOTE_SINGLE') {
    p = start + 1;
  } else {
    p = start;
  }
  const end = Math.max(valueEnd, node.range[2]);
  const dq = node.type === 'QUOTE_DOUBLE';
  const sq = node.type === 'QUOTE_SINGLE';
  for (let i = 0; i <= off; i++) {
    const c = value[i];
    let mapped = -1;
    while (p < end) {
      const s = text[p];
      if (dq && s === '\\') {
        const next = text[p + 1];
        if (next === '\n' || next === '\r') {
          // escaped line break: produces nothing, skip it and the next line's indentation
          p += next === '\r' && text[p + 2] === '\n' ? 3 : 2;
          while (p < end && (text[p] === ' ' || text[p] === '\t')) p++;
          continue;
        }
        mapped = p;
        const len = (next !== undefined && ESCAPE_LENGTH[next]) || 2;
        // \UXXXXXXXX may decode to a surrogate pair: two value characters for one escape
        if (next === 'U' && (value.codePointAt(i) ?? 0) > 0xffff) {
          if (i === off) break;
          i++;
        }
        p += len;
        break;
      }
      if (s === c) {
        mapped = p;
        p++;
        break;
      }
      if ((c === ' ' || c === '\n') && (s === '\n' || s === '\r')) {
        mapped = p; // line folding
        p++;
        break;
      }
      if (s === ' ' || s === '\t' || s === '\n' || s === '\r' || (sq && s === "'")) {
        p++;
        continue;
      }
      return undefined;
    }
    if (mapped < 0) return undefined;
    if (i === off) return mapped;
  }
  return undefined;
}
