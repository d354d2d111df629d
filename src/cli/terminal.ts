/**
 * The terminal as the live display sees it: its width, whether to colour, lines fitted or wrapped to the width by
 * display width (emoji, CJK), ISO timestamps for plain lines, and a small redraw area for bars (log-update style:
 * autowrap stays on, so a line that is too long wraps instead of being cut at the margin).
 */
import ansis from 'ansis';
import stringWidth from 'string-width';
import wrapAnsi from 'wrap-ansi';
import { isoStamp } from './log-line.js';

export interface TermStream {
  write(text: string): unknown;
  columns?: number;
  isTTY?: boolean;
}

/** The usable width: one column short of the terminal's, so no terminal ever wraps a drawn line itself. */
export function terminalWidth(stream: TermStream = process.stderr): number {
  const cols = stream.columns && stream.columns > 0 ? stream.columns : 80;
  return Math.max(10, cols - 1);
}

/** NO_COLOR (any value) turns colour off, FORCE_COLOR (not `0`/`false`) on; else colour only on a TTY. */
export function colourOn(stream: TermStream = process.stderr, env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.NO_COLOR) return false;
  const force = env.FORCE_COLOR;
  if (force !== undefined) return force !== '0' && force !== 'false';
  return stream.isTTY === true && env.TERM !== 'dumb';
}

export type Paint = Record<'green' | 'red' | 'yellow' | 'dim' | 'bold' | 'cyan', (s: string) => string>;

const plain = (s: string) => s;

/** Colour functions through ansis, or identities when colour is off. */
export function painter(on: boolean): Paint {
  if (!on) return { green: plain, red: plain, yellow: plain, dim: plain, bold: plain, cyan: plain };
  return {
    green: (s) => ansis.green(s),
    red: (s) => ansis.red(s),
    yellow: (s) => ansis.yellow(s),
    dim: (s) => ansis.dim(s),
    bold: (s) => ansis.bold(s),
    cyan: (s) => ansis.cyan(s),
  };
}

export const displayWidth = (s: string): number => stringWidth(s);

/** `s` cut to `width` display columns, ending in `…` when cut (colour codes kept whole, then reset). */
export function fitLine(s: string, width: number): string {
  if (stringWidth(s) <= width) return s;
  // wrap-ansi with hard breaks keeps escape sequences whole: its first line is the longest prefix that fits.
  const head = wrapAnsi(s, Math.max(1, width - 1), { hard: true, trim: false, wordWrap: false }).split('\n')[0];
  return `${head}…${s.includes('\x1b[') ? '\x1b[0m' : ''}`;
}

/** `s` wrapped at word boundaries to `width`: the first line after `lead`, the next ones after `indent`. */
export function wrapLines(s: string, width: number, indent = '', lead = ''): string[] {
  const first = wrapAnsi(s, Math.max(10, width - stringWidth(lead)), { hard: true, trim: true }).split('\n');
  if (first.length <= 1 || stringWidth(indent) <= stringWidth(lead)) return first.map((l, i) => `${i ? indent : lead}${l}`);
  const rest = wrapAnsi(first.slice(1).join(' '), Math.max(10, width - stringWidth(indent)), { hard: true, trim: true }).split('\n');
  return [`${lead}${first[0]}`, ...rest.map((l) => `${indent}${l}`)];
}

export { isoStamp };

/** A line writer for a log (not a TTY): every line starts with its ISO timestamp. */
export function stampedWriter(write: (text: string) => void, clock: () => Date = () => new Date()): (line: string) => void {
  return (line) =>
    write(
      `${line
        .split('\n')
        .map((l) => `${isoStamp(clock())} ${l}`)
        .join('\n')}\n`,
    );
}

const UP = (n: number) => (n > 0 ? `\x1b[${n}A` : '');
const CLEAR_DOWN = '\r\x1b[J';

/**
 * A block of lines redrawn in place at the bottom of the output (bars), with log lines printed above it. Each drawn
 * line is fitted to the width, so the cursor arithmetic (lines up) holds; redraws are throttled to `fps`.
 */
export class LiveArea {
  #lines: string[] | (() => string[]) = [];
  #drawn = 0;
  #last = 0;
  #timer?: NodeJS.Timeout;
  #stopped = false;

  #write: (text: string) => unknown;
  #restore?: () => void;

  constructor(
    private readonly stream: TermStream,
    private readonly fps = 10,
    private readonly now: () => number = Date.now,
  ) {
    this.#write = stream.write.bind(stream) as (text: string) => unknown;
    this.#adoptForeignWrites();
    this.#write('\x1b[?25l'); // hide the cursor while bars move
  }

  /**
   * Anything else written to the stream while the bars are up (`--verbose` request lines, a Node warning) goes above
   * them — the area is erased first and redrawn after — instead of leaving a stale copy of the bars behind.
   */
  #adoptForeignWrites(): void {
    const target = this.stream as { write: (...args: unknown[]) => unknown };
    const original = target.write;
    target.write = (chunk: unknown, ...rest: unknown[]) => {
      const erase = this.#erase();
      if (erase) this.#write(erase);
      const out = original.call(this.stream, chunk, ...rest);
      const redraw = this.#render();
      if (redraw) this.#write(redraw);
      return out;
    };
    this.#restore = () => (target.write = original);
  }

  /** New content for the area (or how to make it: called when a frame is drawn): drawn now, or at the next frame. */
  update(lines: string[] | (() => string[])): void {
    this.#lines = lines;
    if (this.#stopped || this.#timer) return;
    const wait = 1000 / this.fps - (this.now() - this.#last);
    if (wait <= 0) this.#draw();
    else this.#timer = setTimeout(() => this.#draw(), wait).unref();
  }

  /** Text printed above the area, wrapped to the width (continuation lines indented by `indent`). */
  log(text: string, indent = '    '): void {
    const width = terminalWidth(this.stream);
    const lines = text.split('\n').flatMap((l) => wrapLines(l, width, indent));
    this.#write(`${this.#erase()}${lines.join('\n')}\n${this.#render()}`);
  }

  /** Draws the last content once more and leaves it; the cursor comes back. */
  stop(): void {
    if (this.#stopped) return;
    this.#draw();
    this.#stopped = true;
    this.#drawn = 0; // the last frame stays on screen
    this.#restore?.();
    this.#write('\x1b[?25h');
  }

  #draw(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#stopped) return;
    this.#last = this.now();
    this.#write(`${this.#erase()}${this.#render()}`);
  }

  #erase(): string {
    const out = this.#drawn ? `${UP(this.#drawn)}${CLEAR_DOWN}` : '';
    this.#drawn = 0;
    return out;
  }

  #render(): string {
    if (this.#stopped) return '';
    const lines = typeof this.#lines === 'function' ? this.#lines() : this.#lines;
    if (!lines.length) return '';
    const width = terminalWidth(this.stream);
    this.#drawn = lines.length;
    return `${lines.map((l) => fitLine(l, width)).join('\n')}\n`;
  }
}
