/**
 * Whether a parsed JSON value nests objects/arrays more than `limit` levels deep, measured without unbounded
 * recursion: a hostile answer nested 10,000 deep is refused once, before any recursive walk (hashing, comparing,
 * JSONata) overflows the stack on it. Up to RECURSIVE_LIMIT the walk recurses (it stops at `limit`: no tuple or
 * value array per object — every listed resource is checked, issue 28 item 3); past it, an explicit stack.
 */
export function nestsDeeperThan(value: unknown, limit: number): boolean {
  if (value === null || typeof value !== 'object') return false;
  return limit <= RECURSIVE_LIMIT ? deeper(value, 1, limit) : deeperByStack(value, limit);
}

const RECURSIVE_LIMIT = 1000;

function deeper(v: object, depth: number, limit: number): boolean {
  if (depth > limit) return true;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const child: unknown = v[i];
      if (child !== null && typeof child === 'object' && deeper(child, depth + 1, limit)) return true;
    }
    return false;
  }
  for (const k in v) {
    if (!Object.hasOwn(v, k)) continue;
    const child = (v as Record<string, unknown>)[k];
    if (child !== null && typeof child === 'object' && deeper(child, depth + 1, limit)) return true;
  }
  return false;
}

function deeperByStack(value: object, limit: number): boolean {
  const stack: [object, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (depth > limit) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
    }
  }
  return false;
}
