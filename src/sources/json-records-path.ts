/**
 * Recognises the `records` expressions of a JSON source that are plain paths and can be streamed:
 * names joined by dots, with array indexes, e.g. `staff`, `data.patients`, `data[0].patients`,
 * `data.0.patients`, `` export.`patient list` ``. Anything else is a general JSONata expression.
 */
export type PathSegment = string | number;

const RESERVED = new Set(['and', 'or', 'in', 'true', 'false', 'null']);

function isNameStart(c: number): boolean {
  return (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95 || c === 36; // A-Z a-z _ $
}

function isNamePart(c: number): boolean {
  return isNameStart(c) || (c >= 48 && c <= 57);
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

/** The segments of a plain path, or undefined when `expr` is not one (then it is evaluated with JSONata). */
export function parsePlainPath(expr: string): PathSegment[] | undefined {
  const s = expr.trim();
  const segs: PathSegment[] = [];
  let i = 0;
  let expectName = true;
  while (i < s.length) {
    const c = s.charCodeAt(i);
    if (expectName) {
      if (c === 96) {
        // `quoted name`
        const close = s.indexOf('`', i + 1);
        if (close <= i + 1) return undefined;
        segs.push(s.slice(i + 1, close));
        i = close + 1;
      } else if (isNameStart(c)) {
        let j = i + 1;
        while (j < s.length && isNamePart(s.charCodeAt(j))) j++;
        const name = s.slice(i, j);
        if (RESERVED.has(name) || name.startsWith('$')) return undefined; // variables / literals
        segs.push(name);
        i = j;
      } else if (isDigit(c) && segs.length > 0) {
        let j = i + 1;
        while (j < s.length && isDigit(s.charCodeAt(j))) j++;
        segs.push(Number(s.slice(i, j)));
        i = j;
      } else {
        return undefined;
      }
      expectName = false;
    } else if (c === 46) {
      // .
      i++;
      expectName = true;
    } else if (c === 91) {
      // [n]
      let j = i + 1;
      while (j < s.length && isDigit(s.charCodeAt(j))) j++;
      if (j === i + 1 || s.charCodeAt(j) !== 93) return undefined;
      segs.push(Number(s.slice(i + 1, j)));
      i = j + 1;
    } else {
      return undefined;
    }
  }
  if (expectName || segs.length === 0) return undefined;
  return segs;
}

/** Whether stream-json's path stack (keys and array indexes) is exactly `segs`. */
export function stackMatches(stack: ReadonlyArray<string | number | null>, segs: readonly PathSegment[]): boolean {
  if (stack.length !== segs.length) return false;
  for (let i = 0; i < segs.length; i++) {
    const want = segs[i];
    const got = stack[i];
    if (got === want) continue;
    // `data.0` also names a key "0" of an object
    if (typeof want === 'number' && got === String(want)) continue;
    return false;
  }
  return true;
}
