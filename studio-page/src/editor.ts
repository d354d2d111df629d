// The mapping editor: CodeMirror 6 with YAML, JSONata highlighting and completion, and the server's diagnostics.
import { autocompletion, closeBrackets, closeBracketsKeymap, completionKeymap } from '@codemirror/autocomplete';
import { defaultKeymap, history, historyKeymap, indentWithTab } from '@codemirror/commands';
import { yaml } from '@codemirror/lang-yaml';
import { bracketMatching, defaultHighlightStyle, foldGutter, foldKeymap, indentOnInput, syntaxHighlighting } from '@codemirror/language';
import { lintGutter, lintKeymap, setDiagnostics, type Diagnostic } from '@codemirror/lint';
import { highlightSelectionMatches, searchKeymap } from '@codemirror/search';
import { EditorState, type Text } from '@codemirror/state';
import { drawSelection, EditorView, highlightActiveLine, highlightActiveLineGutter, keymap, lineNumbers } from '@codemirror/view';
import { jsonataCompletion, jsonataHighlight } from './jsonata.js';
import type { Diag } from './types.js';

export interface EditorOptions {
  parent: HTMLElement;
  text: string;
  functions: readonly string[];
  columnsOf: (source: string | undefined) => string[];
  knownColumns: () => Set<string>;
  onChange: () => void;
  onSave: () => void;
}

/** The page's look of the editor and of the JSONata tokens (theme rules live in the editor's own style sheet). */
const studioTheme = EditorView.theme({
  '&': { height: '100%', fontSize: '13px' },
  '.cm-scroller': { fontFamily: "ui-monospace, 'SFMono-Regular', Menlo, Consolas, monospace" },
  '.cm-jn-function': { color: '#6f42c1' },
  '.cm-jn-variable': { color: '#8250df', fontStyle: 'italic' },
  '.cm-jn-string': { color: '#0a6b3d' },
  '.cm-jn-number': { color: '#b35900' },
  '.cm-jn-keyword': { color: '#a626a4' },
  '.cm-jn-column': { color: '#1f5fbf', fontWeight: '600' },
  '.cm-jn-field': { color: '#1d2330' },
  '.cm-jn-comment': { color: '#6a737d', fontStyle: 'italic' },
  // CodeMirror draws these with data: images, which the CSP (img-src 'self') refuses: plain CSS instead.
  '.cm-lintRange-error': { backgroundImage: 'none', textDecoration: 'underline wavy #e5261f', textDecorationSkipInk: 'none', textUnderlineOffset: '3px' },
  '.cm-lintRange-warning': { backgroundImage: 'none', textDecoration: 'underline wavy #d97706', textDecorationSkipInk: 'none', textUnderlineOffset: '3px' },
  '.cm-lint-marker': { content: 'none', boxSizing: 'border-box', width: '0.8em', height: '0.8em', margin: '0.1em', borderRadius: '50%' },
  '.cm-lint-marker-error': { background: '#f87', border: '0.18em solid #f43' },
  '.cm-lint-marker-warning': { background: '#fd5', border: '0.18em solid #d97706' },
});

/**
 * The editor lives in a shadow root of `opts.parent`: there CodeMirror puts its generated styles in a constructed
 * style sheet (adoptedStyleSheets) instead of a <style> element, which the page's CSP (`default-src 'self'`, no
 * inline style) would block.
 */
export function createEditor(opts: EditorOptions): EditorView {
  const state = EditorState.create({
    doc: opts.text,
    extensions: [
      lineNumbers(),
      highlightActiveLineGutter(),
      foldGutter(),
      lintGutter(),
      history(),
      drawSelection(),
      indentOnInput(),
      bracketMatching(),
      closeBrackets(),
      highlightActiveLine(),
      highlightSelectionMatches(),
      yaml(),
      syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
      studioTheme,
      jsonataHighlight(opts.knownColumns),
      autocompletion({ override: [jsonataCompletion(opts.functions, opts.columnsOf)] }),
      keymap.of([
        { key: 'Mod-s', preventDefault: true, run: () => (opts.onSave(), true) },
        ...closeBracketsKeymap,
        ...defaultKeymap,
        ...searchKeymap,
        ...historyKeymap,
        ...foldKeymap,
        ...completionKeymap,
        ...lintKeymap,
        indentWithTab,
      ]),
      EditorView.contentAttributes.of({ 'aria-label': 'Mapping file (YAML); Escape then Tab leaves the editor' }),
      EditorView.updateListener.of((u) => {
        if (u.docChanged) opts.onChange();
      }),
    ],
  });
  const root = opts.parent.attachShadow({ mode: 'open' });
  return new EditorView({ state, parent: root, root });
}

/** A server diagnostic (1-based line/column in `doc`) as a CodeMirror range: to its end, else to the end of the word. */
export function toDiagnostic(doc: Text, d: Diag): Diagnostic {
  const lineAt = (n: number) => doc.line(Math.min(Math.max(1, n), doc.lines));
  const line = lineAt(d.line);
  const from = Math.min(line.from + Math.max(0, d.column - 1), line.to);
  let to: number;
  if (d.endLine !== undefined && d.endColumn !== undefined) {
    const end = lineAt(d.endLine);
    to = Math.min(end.from + Math.max(0, d.endColumn - 1), end.to);
  } else {
    const word = /^[$A-Za-z0-9_`]+/.exec(doc.sliceString(from, line.to));
    to = from + (word ? word[0].length : 0);
  }
  const message = `${d.message}${d.hint ? `\n${d.hint}` : ''}`;
  return { from, to: Math.max(from, to), severity: d.severity, message, source: d.code };
}

export function showDiagnostics(view: EditorView, diags: Diag[]): void {
  view.dispatch(
    setDiagnostics(
      view.state,
      diags.map((d) => toDiagnostic(view.state.doc, d)),
    ),
  );
}

/** Moves the cursor to a 1-based line/column and focuses the editor (a click in the problems list). */
export function goTo(view: EditorView, line: number, column: number): void {
  const l = view.state.doc.line(Math.min(Math.max(1, line), view.state.doc.lines));
  const pos = Math.min(l.from + Math.max(0, column - 1), l.to);
  view.dispatch({ selection: { anchor: pos }, scrollIntoView: true });
  view.focus();
}
