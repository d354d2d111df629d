/**
 * "Did you mean …?" helper: the candidate closest to `word` by edit distance, if close enough. A candidate differing
 * only in case (`$splitlist` → `$splitList`, `patient` → `Patient`) is the closest of all.
 */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  const w = word.toLowerCase();
  for (const c of candidates) {
    if (c === word) return undefined;
    const d = c.toLowerCase() === w ? 0.5 : levenshtein(w, c.toLowerCase());
    if (d < bestD) {
      bestD = d;
      best = c;
    }
  }
  const limit = Math.max(1, Math.min(3, Math.floor(word.length / 3)));
  return best !== undefined && bestD > 0 && bestD <= limit ? best : undefined;
}

/** Edit distance with adjacent transpositions (optimal string alignment): `form` → `from` is one edit, not two. */
export function levenshtein(a: string, b: string): number {
  let before = Array.from({ length: b.length + 1 }, () => 0);
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      let d = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2]! + 1);
      row.push(d);
    }
    [before, prev] = [prev, row];
  }
  return prev[b.length]!;
}

/**
 * "Did you mean …?" for a column name: the same name in another case (`lastname` → `lastName`), else the closest
 * by edit distance, else a column the name contains or is contained in (`LASTNAME` → `LAST`, `PATIENT_MRN` → `MRN`).
 */
export function closestColumn(field: string, columns: readonly string[]): string | undefined {
  const f = field.toLowerCase();
  const sameCase = columns.find((c) => c.toLowerCase() === f && c !== field);
  if (sameCase !== undefined) return sameCase;
  const near = closest(field, columns);
  if (near !== undefined) return near;
  let best: string | undefined;
  let bestD = Infinity;
  for (const c of columns) {
    const l = c.toLowerCase();
    if (Math.min(l.length, f.length) < 3 || !(f.includes(l) || l.includes(f))) continue;
    const d = levenshtein(f, l);
    if (d < bestD) {
      bestD = d;
      best = c;
    }
  }
  return best;
}
