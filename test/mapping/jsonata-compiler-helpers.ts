/**
 * A value as text for "identical" comparisons between the compiled closures and the interpreter: key order,
 * `undefined`, -0, holes and JSONata's sequence flags (`sequence`, `keepSingleton`, `outerWrapper`, `cons`) are
 * all part of it, because later evaluation steps read them.
 */
export function showValue(v: unknown): string {
  if (v === undefined) return 'undefined';
  if (typeof v === 'function') return 'function';
  if (typeof v === 'number') return Object.is(v, -0) ? '-0' : String(v);
  if (Array.isArray(v)) {
    const a = v as unknown[] & Record<string, unknown>;
    const flags = ['sequence', 'keepSingleton', 'outerWrapper', 'cons', 'tupleStream'].filter((f) => a[f]);
    const items = Array.from({ length: v.length }, (_, i) => (i in v ? showValue(v[i]) : '<hole>'));
    return `[${flags.length ? `<${flags.join(',')}>` : ''}${items.join(',')}]`;
  }
  if (v !== null && typeof v === 'object') {
    return `{${Object.keys(v)
      .map((k) => `${JSON.stringify(k)}:${showValue((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}
