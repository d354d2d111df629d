/** Small text helpers shared by the starter-mapping writers (CSV and FHIR exports). */
import { isAbsolute, relative, sep } from 'node:path';

/** A JSONata field reference: `MRN`, or `` `First Name` `` for names that are not identifiers. */
export function field(name: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : `\`${name}\``;
}

/** A YAML scalar: plain when safe, else single-quoted when that needs no escape, else double-quoted (JSON escapes are valid YAML). */
export function yamlScalar(s: string): string {
  if (/^[A-Za-z0-9_./][A-Za-z0-9_./ -]*$/.test(s) && !s.endsWith(' ') && !/^(true|false|null|yes|no|on|off|~|[0-9.+-]+)$/i.test(s)) return s;
  if (!s.includes("'") && !/[\n\r\t]/.test(s) && (s.includes('"') || s.includes('\\'))) return `'${s}'`;
  return JSON.stringify(s);
}

const posix = (p: string) => p.split(sep).join('/');

/** `target` relative to `dir`, with forward slashes (absolute when on another drive). */
export function relativeFrom(dir: string, target: string): string {
  const rel = relative(dir, target);
  if (isAbsolute(rel)) return posix(target);
  return posix(rel) || '.';
}

/** A TODO marker (src/mapping/todo-markers.ts): `validate` reports it, with this text, until it is replaced. */
export const todo = (hint: string) => `$TODO(${JSON.stringify(hint)})`;

/** Words of `text` in lines of at most `width` characters. */
export function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}
