/**
 * Regular expressions of mappings run on RE2 (re2js): time linear in the input. `LinearRegExp` is the `RegexEngine`
 * JSONata accepts; what RE2 cannot run is a `LinearRegexError`, found when the mapping is checked.
 * Design: docs/design/expression-safety.md.
 */
import type { RE2JS } from 're2js';
import { requiredWhenUsed } from './lazy-require.js';

/** re2js (260 KB of source): loaded by a mapping's first regular expression. */
const re2js = requiredWhenUsed<{ RE2JS: typeof RE2JS }>('re2js');
const re2 = (): typeof RE2JS => re2js().RE2JS;

/** JavaScript's `\s` (ECMAScript WhiteSpace + LineTerminator), written as class members. */
const JS_SPACE = '\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff';
/** JavaScript's `.` without the `s` flag (JSONata has no `s` flag). */
const JS_DOT = '[^\\n\\r\\u2028\\u2029]';

export class LinearRegexError extends Error {
  constructor(
    message: string,
    /** What to write instead, for the user. */
    readonly fix: string,
  ) {
    super(message);
    this.name = 'LinearRegexError';
  }
}

interface Translated {
  pattern: string;
  unsupported?: { what: string; fix: string };
}

/** JavaScript (non-`u`) pattern source → RE2 pattern, or what RE2 cannot run. */
function translate(source: string): Translated {
  const hasNamedGroups = /\(\?<[^=!]/.test(source);
  let out = '';
  let inClass = false;
  for (let i = 0; i < source.length; i++) {
    const ch = source[i]!;
    if (ch === '\\' && i + 1 < source.length) {
      const next = source[i + 1]!;
      i++;
      if (next === 's' && inClass && source[i + 1] === '-') {
        out += `${JS_SPACE}\\-`; // `[\s-x]`: JavaScript reads the `-` literally, after the inlined list it would be a range
        i++;
      } else if (next === 's') out += inClass ? JS_SPACE : `[${JS_SPACE}]`;
      else if (next === 'S' && !inClass) out += `[^${JS_SPACE}]`;
      else if (!inClass && /[1-9]/.test(next)) {
        return {
          pattern: source,
          unsupported: {
            what: `a backreference \`\\${next}\``,
            fix: 'capture the parts separately and compare them in the expression: `$m := $match(…); $m.groups[0] = $m.groups[1]`',
          },
        };
      } else if (!inClass && next === 'k' && source[i + 1] === '<' && hasNamedGroups) {
        return {
          pattern: source,
          unsupported: { what: 'a named backreference `\\k<…>`', fix: 'capture the parts separately and compare them in the expression' },
        };
      } else out += `\\${next}`;
      continue;
    }
    if (inClass) {
      if (ch === ']') inClass = false;
      out += ch;
      continue;
    }
    if (ch === '[') {
      inClass = true;
      out += ch;
      // `[]` and `[^]`: JavaScript's empty and any-character classes, left whole for re2js's own translation
      if (source[i + 1] === ']' || (source[i + 1] === '^' && source[i + 2] === ']')) {
        out += source[i + 1] === ']' ? ']' : '^]';
        i += source[i + 1] === ']' ? 1 : 2;
        inClass = false;
      }
      continue;
    }
    if (ch === '.') {
      out += JS_DOT;
      continue;
    }
    if (ch === '(' && source[i + 1] === '?') {
      const a = source[i + 2];
      const b = source[i + 3];
      if (a === '=' || a === '!' || (a === '<' && (b === '=' || b === '!'))) {
        const kind = a === '<' ? 'lookbehind' : 'lookahead';
        const token = a === '<' ? `(?<${b}` : `(?${a}`;
        return {
          pattern: source,
          unsupported: {
            what: `a ${kind} \`${token}…)\``,
            fix: 'match the surrounding text too and keep the part you need with a capture group (`$match(…).groups`), or test the condition separately with `$contains`',
          },
        };
      }
    }
    out += ch;
  }
  return { pattern: re2().translateRegExp(out) };
}

const cache = new Map<string, RE2JS>();
/** Literals come from mapping text, but `$eval` can parse patterns out of cells: the cache is bounded. */
const CACHE_MAX = 1000;

/**
 * The RE2 program of a JavaScript regular expression (JSONata's literals carry the flags `i`, `m` and `g`).
 * Cached by source and flags: JSONata constructs the engine each time the literal is evaluated, once per row.
 */
export function compileLinear(re: RegExp | string): RE2JS {
  const source = typeof re === 'string' ? re : re.source;
  const flags = typeof re === 'string' ? '' : re.flags;
  const cacheKey = `${flags.includes('i') ? 'i' : ''}${flags.includes('m') ? 'm' : ''}/${source}`;
  const hit = cache.get(cacheKey);
  if (hit) return hit;
  const t = translate(source);
  if (t.unsupported) {
    throw new LinearRegexError(
      `the regular expression /${source}/ uses ${t.unsupported.what}, which the linear-time regex engine (RE2) cannot run`,
      t.unsupported.fix,
    );
  }
  let program: RE2JS;
  try {
    program = re2().compile(t.pattern, (flags.includes('i') ? re2().CASE_INSENSITIVE : 0) | (flags.includes('m') ? re2().MULTILINE : 0));
  } catch (err) {
    const why = err instanceof Error ? err.message.replace(/^error parsing regexp: /, '') : String(err);
    throw new LinearRegexError(
      `the regular expression /${source}/ cannot run on the linear-time regex engine (RE2): ${why}`,
      /repeat count/.test(why)
        ? 'use a repeat count of at most 1000 (`{1,1000}`), or `+` / `*`'
        : 'rewrite it in RE2 syntax (https://github.com/google/re2/wiki/Syntax)',
    );
  }
  if (cache.size >= CACHE_MAX) cache.clear();
  cache.set(cacheKey, program);
  return program;
}

/** The `RegExp` subset JSONata uses (`lastIndex`, `exec`), on RE2. Behaves as a `g` regular expression. */
export class LinearRegExp {
  lastIndex = 0;
  private readonly program: RE2JS;
  private input: string | undefined;
  private matcher: ReturnType<RE2JS['matcher']> | undefined;

  constructor(re: RegExp | string) {
    this.program = compileLinear(re);
  }

  exec(str: string): RegExpExecArray | null {
    const s = String(str);
    if (this.lastIndex > s.length) {
      this.lastIndex = 0;
      return null;
    }
    if (this.input !== s || this.matcher === undefined) {
      this.input = s;
      this.matcher = this.program.matcher(s);
    }
    const m = this.matcher;
    if (!m.find(this.lastIndex)) {
      this.lastIndex = 0;
      return null;
    }
    const n = m.groupCount();
    const out = [] as unknown as RegExpExecArray;
    for (let g = 0; g <= n; g++) out.push((m.group(g) ?? undefined) as string);
    out.index = m.start();
    out.input = s;
    this.lastIndex = m.end();
    return out;
  }

  test(str: string): boolean {
    return this.exec(str) !== null;
  }
}

/** `LinearRegExp` typed as the option JSONata declares (`jsonata(src, { RegexEngine })`). */
export const LINEAR_REGEX_ENGINE = LinearRegExp as unknown as RegExpConstructor;
