/**
 * Whether a parsed JSON value nests objects/arrays more than `limit` levels deep, measured without recursion:
 * a hostile answer nested 10,000 deep is refused once, before any recursive walk (hashing, comparing, JSONata)
 * overflows the stack on it.
 */
export function nestsDeeperThan(value: unknown, limit: number): boolean {
  if (value === null || typeof value !== 'object') return false;
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
