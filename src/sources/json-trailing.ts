/**
 * Where the text after a file's first complete JSON value starts, if any (issue 25): stream-json only says
 * "unexpected characters", which the reader would report as invalid JSON before its first record. Scans
 * brackets and strings only (the parser has judged the rest), on the error path only, in 64 KiB chunks.
 */
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';

export interface TrailingData {
  /** The top-level value that ended before it. */
  after: 'array' | 'object';
  line: number;
  column: number;
}

const WHITESPACE = new Set([' ', '\t', '\n', '\r', '\ufeff']);
/** Up to this size the value before the trailing text is parsed too (a syntax error inside it is not "trailing"). */
const CONFIRM_MAX_BYTES = 64 * 1024 * 1024;

/**
 * The position of the first non-whitespace character after the first complete top-level array or object, when the
 * value before it is valid JSON (checked for files up to 64 MiB).
 */
export async function findTrailingData(path: string): Promise<TrailingData | undefined> {
  const found = await scan(path);
  if (!found || (await stat(path)).size > CONFIRM_MAX_BYTES) return found?.at;
  const text = await readFile(path, 'utf8');
  try {
    JSON.parse(text.slice(0, found.end).replace(/^\ufeff/, ''));
    return found.at;
  } catch {
    return undefined;
  }
}

async function scan(path: string): Promise<{ at: TrailingData; end: number } | undefined> {
  const decoder = new StringDecoder('utf8');
  let depth = 0;
  let inString = false;
  let escaped = false;
  let after: TrailingData['after'] | undefined;
  let line = 1;
  let column = 0;
  let offset = 0;
  let end = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: 64 * 1024 })) {
    const text = decoder.write(chunk as Buffer);
    for (let i = 0; i < text.length; i++, offset++) {
      const c = text[i]!;
      if (c === '\n') {
        line++;
        column = 0;
      } else column++;
      if (after !== undefined) {
        if (!WHITESPACE.has(c)) return { at: { after, line, column }, end };
      } else if (inString) {
        if (escaped) escaped = false;
        else if (c === '\\') escaped = true;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === '[' || c === '{') depth++;
      else if (c === ']' || c === '}') {
        if (--depth === 0) {
          after = c === ']' ? 'array' : 'object';
          end = offset + 1;
        }
        if (depth < 0) return undefined;
      }
    }
  }
  return undefined;
}
