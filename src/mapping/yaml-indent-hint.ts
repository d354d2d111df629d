/**
 * A hint for YAML errors caused by indentation — the commonest YAML mistake, which the parser words as "Sequence
 * item without - indicator" or "Implicit keys need to be on a single line", often on the line before. Names the line
 * whose indentation is off, by how many spaces, and the indentation it probably needs.
 */

interface ContentLine {
  /** 1-based line number. */
  line: number;
  indent: number;
  text: string;
  /** Its indentation holds a tab. */
  tab: boolean;
}

const BLOCK_SCALAR = /(?:^|:|^-)\s*[|>][-+0-9]*\s*(?:#.*)?$/;

/** The hint for a YAML error reported at `line` (1-based): about that line or the next content line; '' when indentation looks fine. */
export function indentationHint(text: string, line: number): string {
  const lines = contentLines(text);
  const at = lines.findIndex((l) => l.line >= line);
  if (at < 0 || lines[at]!.tab) return ''; // yaml's own message says it: "Tabs are not allowed as indentation"
  for (const i of [at, at + 1]) {
    if (i <= 0 || i >= lines.length) continue;
    const hint = hintFor(lines, i);
    if (hint) return hint;
  }
  return '';
}

/** Non-blank, non-comment lines, without the lines inside block scalars (`map: |`). */
function contentLines(text: string): ContentLine[] {
  const out: ContentLine[] = [];
  let scalarIndent = -1;
  text.split(/\r?\n/).forEach((raw, n) => {
    const body = raw.trimStart();
    if (body === '' || body.startsWith('#')) return;
    const indent = raw.length - body.length;
    if (scalarIndent >= 0 && indent > scalarIndent) return;
    scalarIndent = BLOCK_SCALAR.test(body) ? indent : -1;
    out.push({ line: n + 1, indent, text: body, tab: raw.slice(0, indent).includes('\t') });
  });
  return out;
}

function hintFor(lines: ContentLine[], i: number): string {
  const cur = lines[i]!;
  const prev = lines[i - 1]!;
  if (cur.tab) return '';
  const dash = /^-(?=[^\s-])/.test(cur.text) ? /^-[^\s:]*/.exec(cur.text)![0] : undefined;
  if (dash) return `line ${cur.line} starts with \`${dash}\`: a list item needs a space after its \`-\` (\`- ${dash.slice(1)}\`)`;
  const stack = indentStack(lines.slice(0, i));
  const top = stack.at(-1)!.indent;
  if (cur.indent > top) {
    if (opensBlock(prev.text) || openFlow(prev.text)) return '';
    return `line ${cur.line} is indented by ${cur.indent} spaces, deeper than line ${prev.line} (${top}), whose key already has a value: indent it by ${top} if it is the next key`;
  }
  if (BLOCK_SCALAR.test(prev.text)) {
    return `line ${cur.line} is indented by ${cur.indent} spaces, which ends the block that line ${prev.line} starts with \`${/[|>][-+0-9]*(?=\s*(?:#.*)?$)/.exec(prev.text)?.[0] ?? '|'}\`: indent the block's lines deeper than its key (by ${prev.indent + 2})`;
  }
  const level = stack.find((l) => l.indent === cur.indent);
  if (level?.dash && !cur.text.startsWith('-')) {
    const keys = stack[stack.indexOf(level) + 1]?.indent ?? cur.indent + 2;
    return `line ${cur.line} is indented by ${cur.indent} spaces, like the \`-\` of line ${level.line}, but is not a new item: indent it by ${keys} to line it up with that item's keys`;
  }
  if (level) return '';
  const indents = stack.map((l) => l.indent);
  const nearest = indents.reduce((a, b) => (Math.abs(b - cur.indent) <= Math.abs(a - cur.indent) ? b : a));
  return `line ${cur.line} is indented by ${cur.indent} spaces, but the keys before it by ${indents.join(', ')}: YAML nests by indentation — indent it by ${nearest} to line it up with the key it belongs to`;
}

interface Level {
  indent: number;
  /** The `-` of a sequence item: only another item may start at this indentation. */
  dash: boolean;
  line: number;
}

/** The indentations a next line may line up with: the open nesting levels (a `- ` item opens two). */
function indentStack(before: ContentLine[]): Level[] {
  const stack: Level[] = [{ indent: 0, dash: false, line: 0 }];
  for (const l of before) {
    while (stack.length > 1 && stack.at(-1)!.indent > l.indent) stack.pop();
    const item = /^-\s+(?=\S)/.exec(l.text);
    if (stack.at(-1)!.indent === l.indent) stack.pop();
    stack.push({ indent: l.indent, dash: item !== null, line: l.line });
    if (item) stack.push({ indent: l.indent + item[0].length, dash: false, line: l.line });
  }
  return stack;
}

/** A `{ …` or `[ …` flow collection continued on the next line. */
function openFlow(text: string): boolean {
  return (text.match(/[{[]/g)?.length ?? 0) > (text.match(/[}\]]/g)?.length ?? 0);
}

/** A line after which a deeper one is expected: `key:` with nothing after it, a bare `-`, or a block scalar. */
function opensBlock(text: string): boolean {
  const body = text.replace(/\s+#.*$/, '');
  return /:$/.test(body) || body === '-' || BLOCK_SCALAR.test(body);
}
