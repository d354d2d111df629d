import { createInterface } from 'node:readline';
import { pipeline, Transform, type TransformCallback } from 'node:stream';
import { rejectItem, sourceFatal, wrapReadError } from './source-errors.js';
import { fileStream, openSourceFile } from './source-file.js';
import { NDJSON_MAX_LINE_BYTES, type SourceConfig, type SourceItem } from './types.js';

/**
 * Fails the stream when a line grows past `max` bytes: readline would otherwise buffer it whole
 * (e.g. a large JSON document given an .ndjson name). Costs one `lastIndexOf` per chunk.
 */
class LineLengthGuard extends Transform {
  private run = 0;
  constructor(private readonly max: number) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, callback: TransformCallback): void {
    const first = chunk.indexOf(10);
    if (this.run + (first === -1 ? chunk.length : first) > this.max) {
      callback(new LineTooLongError(this.max));
      return;
    }
    this.run = first === -1 ? this.run + chunk.length : chunk.length - chunk.lastIndexOf(10) - 1;
    callback(null, chunk);
  }
}

class LineTooLongError extends Error {
  constructor(readonly max: number) {
    super(`line longer than ${max} bytes`);
    this.name = 'LineTooLongError';
  }
}

/**
 * JSON.parse messages can quote the input (`Unexpected token 'a', "abc…" is not valid JSON`): keep
 * V8's fixed reason phrase and the position only.
 */
function jsonSyntaxMessage(err: unknown): string {
  const text = err instanceof Error ? err.message : '';
  const m = /^([A-Za-z -]+?) in JSON at position (\d+)/.exec(text);
  if (m) return `invalid JSON: ${m[1].charAt(0).toLowerCase()}${m[1].slice(1)} at column ${Number(m[2]) + 1}`;
  if (text.startsWith('Unexpected end of JSON input')) return 'invalid JSON: unexpected end of line';
  return 'invalid JSON';
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

function isBlank(line: string): boolean {
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i);
    if (c !== 32 && c !== 9 && c !== 13 && c !== 0xfeff) return false;
  }
  return true;
}

/** Streams an NDJSON / JSON Lines source: one JSON object per line; blank lines are skipped. */
export async function* readNdjson(cfg: SourceConfig, signal?: AbortSignal): AsyncGenerator<SourceItem, void, undefined> {
  const opened = await openSourceFile(cfg);
  const input = fileStream(opened, signal);
  const guard = new LineLengthGuard(NDJSON_MAX_LINE_BYTES);
  pipeline(input, guard, () => undefined);
  const lines = createInterface({ input: guard, crlfDelay: Infinity });
  const source = cfg.name;
  const file = cfg.path;
  let lineNo = 0;
  let recordNo = 0;
  try {
    for await (const line of lines) {
      lineNo++;
      const text = lineNo === 1 && line.charCodeAt(0) === 0xfeff ? line.slice(1) : line;
      // Fast path: a record line starts with `{`.
      if (text.charCodeAt(0) !== 123 && isBlank(text)) continue;
      const record = ++recordNo;
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (err) {
        yield rejectItem({ source, file, line: lineNo, record }, 'json-syntax', jsonSyntaxMessage(err), text);
        continue;
      }
      if (value === null || typeof value !== 'object' || Array.isArray(value)) {
        yield rejectItem({ source, file, line: lineNo, record }, 'not-object', `expected a JSON object, got ${kindOf(value)}`, text);
        continue;
      }
      yield { ok: true, data: value as Record<string, unknown>, origin: { source, file, line: lineNo, record } };
    }
  } catch (err) {
    if (err instanceof LineTooLongError) {
      throw sourceFatal(cfg, `line ${lineNo + 1} is longer than ${err.max} bytes — is this really NDJSON (one JSON object per line)?`, {
        code: 'json-syntax',
        line: lineNo + 1,
      });
    }
    throw wrapReadError(cfg, err, { line: lineNo + 1, what: 'NDJSON read error' });
  } finally {
    lines.close();
    guard.destroy();
    input.destroy();
  }
}
