/** Log lines on stderr, without the terminal module's dependencies (every command's shell writes some). */

/** `2026-11-25T19:20:01Z`: UTC, to the second. */
export function isoStamp(d: Date = new Date()): string {
  return `${d.toISOString().slice(0, 19)}Z`;
}

/** A line for stderr: as is on a terminal; in a log (not a TTY) every line starts with its timestamp (docs/terminal.md "In a log"). */
export function stderrLine(line: string, stream: { isTTY?: boolean } = process.stderr, clock: () => Date = () => new Date()): string {
  if (stream.isTTY) return `${line}\n`;
  return `${line
    .split('\n')
    .map((l) => `${isoStamp(clock())} ${l}`)
    .join('\n')}\n`;
}
