/** String.prototype.isWellFormed (ES2024, in Node 20; not in this project's ES2023 lib typings): no lone UTF-16 surrogate. */
export function isWellFormed(s: string): boolean {
  return (s as unknown as { isWellFormed(): boolean }).isWellFormed();
}
