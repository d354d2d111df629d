// JSONata awareness inside the YAML: which values are expressions, their highlighting, and completion of the
// source's column names, the lookup tables and the functions (JSONata's built-ins and care-etl's library).
import type { CompletionContext, CompletionResult, Completion } from '@codemirror/autocomplete';
import { syntaxTree } from '@codemirror/language';
import { RangeSetBuilder, type EditorState } from '@codemirror/state';
import { Decoration, ViewPlugin, type DecorationSet, type EditorView, type ViewUpdate } from '@codemirror/view';
import type { SyntaxNode } from '@lezer/common';

/** Mapping keys whose values are JSONata (schemas/mapping.schema.json). */
const EXPRESSION_KEYS = new Set(['map', 'key', 'groupBy', 'where', 'match', 'records', 'value']);

interface ExpressionRange {
  from: number;
  to: number;
  /** The YAML node of the value, to find the mapping around it. */
  node: SyntaxNode;
}

function keyText(state: EditorState, pair: SyntaxNode): string | undefined {
  const key = pair.getChild('Key');
  return key ? state.sliceDoc(key.from, key.to).trim() : undefined;
}

function valueOf(pair: SyntaxNode): SyntaxNode | null {
  let value = pair.getChild('Key')?.nextSibling ?? null;
  while (value && value.name === ':') value = value.nextSibling;
  return value;
}

/** The text ranges of every expression value (a block scalar's content, a quoted string's inside, a plain scalar). */
export function expressionRanges(state: EditorState): ExpressionRange[] {
  const out: ExpressionRange[] = [];
  syntaxTree(state).iterate({
    enter(ref) {
      if (ref.name !== 'Pair') return;
      const pair = ref.node;
      const name = keyText(state, pair);
      if (!name || !EXPRESSION_KEYS.has(name)) return;
      const value = valueOf(pair);
      if (!value) return;
      if (value.name === 'BlockLiteral') {
        const content = value.getChild('BlockLiteralContent');
        if (content) out.push({ from: content.from, to: content.to, node: value });
      } else if (value.name === 'QuotedLiteral' && value.to - value.from >= 2) out.push({ from: value.from + 1, to: value.to - 1, node: value });
      else if (value.name === 'Literal') out.push({ from: value.from, to: value.to, node: value });
      return false;
    },
  });
  return out;
}

/** The value of `key` in the YAML mapping that holds `node` (e.g. the `from:` of the resource mapping around it). */
function siblingValue(state: EditorState, node: SyntaxNode, key: string): string | undefined {
  for (let n: SyntaxNode | null = node; n; n = n.parent) {
    if (n.name !== 'BlockMapping' && n.name !== 'FlowMapping') continue;
    for (const pair of n.getChildren('Pair')) {
      if (keyText(state, pair) !== key) continue;
      const value = valueOf(pair);
      if (value) return state.sliceDoc(value.from, value.to).replace(/^["']|["']$/g, '');
    }
  }
  return undefined;
}

/** Names of the lookup tables (`lookups:` at the top), bound as `$<name>` in every expression. */
function lookupNames(state: EditorState): string[] {
  const doc = syntaxTree(state).topNode.getChild('Document')?.firstChild;
  for (const pair of doc?.getChildren('Pair') ?? []) {
    if (keyText(state, pair) !== 'lookups') continue;
    const tables = valueOf(pair);
    return (tables?.getChildren('Pair') ?? []).map((p) => keyText(state, p) ?? '').filter(Boolean);
  }
  return [];
}

const TOKEN =
  /(\/\*[\s\S]*?\*\/)|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')|(\$[A-Za-z_][A-Za-z0-9_]*)(?=\s*(\()?)|(\b\d+(?:\.\d+)?\b)|(`[^`\n]*`|[A-Za-z_][A-Za-z0-9_]*)/g;
const KEYWORDS = new Set(['and', 'or', 'in', 'true', 'false', 'null', 'function']);

const mark = (cls: string) => Decoration.mark({ class: cls });
const MARKS = {
  comment: mark('cm-jn-comment'),
  string: mark('cm-jn-string'),
  fn: mark('cm-jn-function'),
  variable: mark('cm-jn-variable'),
  number: mark('cm-jn-number'),
  keyword: mark('cm-jn-keyword'),
  column: mark('cm-jn-column'),
  field: mark('cm-jn-field'),
};

function classify(m: RegExpExecArray, columns: Set<string>): Decoration {
  if (m[1]) return MARKS.comment;
  if (m[2]) return MARKS.string;
  if (m[3]) return m[4] ? MARKS.fn : MARKS.variable;
  if (m[5]) return MARKS.number;
  const word = m[6]!.replace(/^`|`$/g, '');
  if (KEYWORDS.has(word)) return MARKS.keyword;
  return columns.has(word) ? MARKS.column : MARKS.field;
}

function decorate(state: EditorState, columns: Set<string>): DecorationSet {
  const builder = new RangeSetBuilder<Decoration>();
  for (const range of expressionRanges(state)) {
    const text = state.sliceDoc(range.from, range.to);
    for (const m of text.matchAll(TOKEN)) {
      const from = range.from + m.index!;
      const length = m[3] ? m[3].length : m[0].length;
      builder.add(from, from + length, classify(m as RegExpExecArray, columns));
    }
  }
  return builder.finish();
}

/** Highlights the expressions: functions, variables, strings, numbers, and the names that are columns of a source. */
export function jsonataHighlight(knownColumns: () => Set<string>) {
  return ViewPlugin.fromClass(
    class {
      decorations: DecorationSet;
      private columnCount = knownColumns().size;
      constructor(view: EditorView) {
        this.decorations = decorate(view.state, knownColumns());
      }
      update(u: ViewUpdate) {
        const columns = knownColumns();
        if (u.docChanged || syntaxTree(u.startState) !== syntaxTree(u.state) || columns.size !== this.columnCount) {
          this.columnCount = columns.size;
          this.decorations = decorate(u.state, columns);
        }
      }
    },
    { decorations: (v) => v.decorations },
  );
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Completion inside an expression: `$…` → functions and lookup tables; a name → the columns of the mapping's source
 * (`from:`), as the last evaluation saw them. `functions`: JSONata's built-ins and care-etl's library, by name.
 */
export function jsonataCompletion(functions: readonly string[], columnsOf: (source: string | undefined) => string[]) {
  return (ctx: CompletionContext): CompletionResult | null => {
    const range = expressionRanges(ctx.state).find((r) => ctx.pos >= r.from && ctx.pos <= r.to);
    if (!range) return null;
    const dollar = ctx.matchBefore(/\$[A-Za-z0-9_]*/);
    if (dollar) {
      const options: Completion[] = [
        ...lookupNames(ctx.state).map((n) => ({ label: `$${n}`, type: 'variable', detail: 'lookup table' })),
        ...functions.map((f) => ({ label: `$${f}`, type: 'function', apply: `$${f}(` })),
      ];
      return { from: dollar.from, options, validFor: /^\$[A-Za-z0-9_]*$/ };
    }
    const word = ctx.matchBefore(/[A-Za-z_][A-Za-z0-9_]*/);
    if (!word && !ctx.explicit) return null;
    const source = siblingValue(ctx.state, range.node, 'from');
    const options = columnsOf(source).map((c) => ({ label: c, type: 'property', detail: 'column', apply: IDENTIFIER.test(c) ? c : `\`${c}\`` }));
    return { from: word?.from ?? ctx.pos, options, validFor: /^[A-Za-z0-9_]*$/ };
  };
}
