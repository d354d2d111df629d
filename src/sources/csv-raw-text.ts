/**
 * Line arithmetic on CSV text, in two forms:
 * - file text: the bytes of the file decoded; a line break is CRLF, LF or a lone CR;
 * - csv-parse `raw`: the characters csv-parse visited for a record. It is the file text minus the LF
 *   of every CRLF that ended a line *outside* quotes (record terminators, empty and comment lines),
 *   so there each CR or LF character is one line break. A CRLF inside a quoted field is kept whole.
 */

const CR = 13;
const LF = 10;

/** Line breaks in file text between `from` and `to` (CRLF counts once). */
export function countBreaks(s: string, from = 0, to = s.length): number {
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c === LF) n++;
    else if (c === CR && (i + 1 >= to || s.charCodeAt(i + 1) !== LF)) n++;
  }
  return n;
}

/** Occurrences of CRLF. */
export function countCrlf(s: string, from = 0, to = s.length): number {
  let n = 0;
  let i = s.indexOf('\r\n', from);
  while (i !== -1 && i + 1 < to) {
    n++;
    i = s.indexOf('\r\n', i + 2);
  }
  return n;
}

/** Index just past `n` line breaks of file text starting at `from` (CRLF counts once); s.length if fewer. */
export function skipLines(s: string, n: number, from = 0): number {
  let i = from;
  while (n > 0 && i < s.length) {
    const c = s.charCodeAt(i++);
    if (c === LF) n--;
    else if (c === CR) {
      if (i < s.length && s.charCodeAt(i) === LF) i++;
      n--;
    }
  }
  return i;
}

/** Index just past `n` line breaks of a csv-parse raw (each CR or LF is one break); raw.length if fewer. */
export function skipRawLines(raw: string, n: number): number {
  let i = 0;
  while (n > 0 && i < raw.length) {
    const c = raw.charCodeAt(i++);
    if (c === LF || c === CR) n--;
  }
  return i;
}

/** Index of the start of the line after the break at or after `pos` (file text), or -1. */
export function nextLineStart(s: string, pos: number): number {
  for (let i = pos; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === LF) return i + 1;
    if (c === CR) return i + 1 < s.length && s.charCodeAt(i + 1) === LF ? i + 2 : i + 1;
  }
  return -1;
}

/** Index after removing every trailing CR/LF. */
export function trimTrailingBreaks(s: string, from = 0, to = s.length): number {
  let end = to;
  while (end > from) {
    const c = s.charCodeAt(end - 1);
    if (c !== LF && c !== CR) break;
    end--;
  }
  return end;
}

/**
 * Matches a csv-parse raw against file text starting at `pos`, allowing the file to have an LF after a
 * CR the raw dropped. Returns the index in `s` just past the match, -1 on a mismatch, or -2 when the
 * text ends before the raw does.
 */
export function matchRawForward(s: string, pos: number, raw: string): number {
  let i = pos;
  let j = 0;
  while (j < raw.length) {
    if (i >= s.length) return -2;
    const c = s.charCodeAt(i);
    if (c === raw.charCodeAt(j)) {
      i++;
      j++;
    } else if (c === LF && j > 0 && raw.charCodeAt(j - 1) === CR) {
      i++;
    } else {
      return -1;
    }
  }
  return i;
}

/**
 * Matches a csv-parse raw against the end of file text `s` (same tolerance as `matchRawForward`).
 * Returns the index in `s` where the raw starts, or -1.
 */
export function matchRawBackward(s: string, raw: string): number {
  let i = s.length;
  let j = raw.length;
  while (j > 0) {
    if (i <= 0) return -1;
    const c = s.charCodeAt(i - 1);
    const r = raw.charCodeAt(j - 1);
    if (c === r) {
      i--;
      j--;
    } else if (c === LF && r === CR && i >= 2 && s.charCodeAt(i - 2) === CR) {
      i--;
    } else {
      return -1;
    }
  }
  return i;
}

/**
 * csv-parse's own line increments for the characters of a raw before its last character: it counts
 * one line per CR and per LF it visits (so a CRLF inside quotes counts twice), each counted when the
 * next character is visited.
 */
export function parserLineIncrements(raw: string): number {
  let n = 0;
  const last = raw.length - 1;
  for (let i = 0; i < last; i++) {
    const c = raw.charCodeAt(i);
    if (c === LF || c === CR) n++;
  }
  return n;
}

/**
 * In file text starting with a dropped record whose partial raw is `prevRaw`: the index of the line
 * start where the next record (partial raw `nextRaw`) begins; -1 if the text does not fit, -2 if more
 * text is needed to decide.
 */
export function findNextRecordStart(s: string, prevRaw: string, nextRaw: string): number {
  const after = matchRawForward(s, 0, prevRaw);
  if (after < 0) return after;
  let q = nextLineStart(s, after);
  while (q !== -1) {
    const m = matchRawForward(s, q, nextRaw);
    if (m >= 0) return q;
    if (m === -2) return -2;
    q = nextLineStart(s, q);
  }
  return -2;
}

/** Index just past the last line break of `s` (0 if none). */
export function afterLastBreak(s: string): number {
  for (let i = s.length - 1; i >= 0; i--) {
    const c = s.charCodeAt(i);
    if (c === LF || c === CR) return i + 1;
  }
  return 0;
}
