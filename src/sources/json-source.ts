import { pipeline, type Readable } from 'node:stream';
import { Pick, StreamArray } from '../core/stream-json-package.js';
import { DecodeToUtf8, encodingAdvice, invalidBytesMessage, resolveEncoding } from './decode-stream.js';
import { parsePlainPath, stackMatches, type PathSegment } from './json-records-path.js';
import { recordBoundsViolation, TOO_LONG_KEY, TOO_LONG_NUMBER, TOO_LONG_STRING } from './record-bounds.js';
import { BoundedJsonParser, DocumentTooDeep } from './json-token-bounds.js';
import { CareEtlError } from '../core/issues.js';
import { isAbortError, rejectItem, sourceFatal, wrapReadError } from './source-errors.js';
import { fileStream, openSourceFile, type OpenedSource } from './source-file.js';
import { findTrailingData } from './json-trailing.js';
import { JSON_MAX_WHOLE_FILE_BYTES, type ByteMeter, type SourceConfig, type SourceItem } from './types.js';

/*
 * JSON reader. The records are the elements of one array: the top-level value, or the value at
 * `records`. A plain path is streamed with stream-json (parser → pick → streamArray: one element in
 * memory at a time). Any other JSONata expression needs the whole document: the file is read and
 * parsed (refused above JSON_MAX_WHOLE_FILE_BYTES) and the expression evaluated with jsonata.
 * Element i is record i+1; JSON has no line numbers here. The file is UTF-8, or UTF-16 with a byte-order mark
 * (decode-stream.ts); bytes that are not valid UTF-8 are fatal (stream-json tells no element positions): an
 * error naming their offset and line, raised before the element holding them is handed out.
 */

function newDecoder(): DecodeToUtf8 {
  return new DecodeToUtf8(resolveEncoding(undefined)!);
}

/** The fatal error for the first invalid bytes the decoder found, if any. */
function invalidBytesError(cfg: SourceConfig, decoder: DecodeToUtf8): Error | undefined {
  const first = decoder.invalid[0];
  if (first === undefined) return undefined;
  return sourceFatal(cfg, invalidBytesMessage([first], encodingAdvice(decoder, undefined, undefined)), { code: 'encoding-invalid', line: first.line });
}

const TOKEN_KIND: Readonly<Record<string, string>> = {
  startObject: 'an object',
  startArray: 'an array',
  startString: 'a string',
  stringValue: 'a string',
  startNumber: 'a number',
  numberValue: 'a number',
  nullValue: 'null',
  trueValue: 'a boolean',
  falseValue: 'a boolean',
};

function kindOf(value: unknown): string {
  if (value === TOO_LONG_STRING) return 'a string';
  if (value === TOO_LONG_NUMBER) return 'a number';
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

function isRecordObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && value !== TOO_LONG_STRING && value !== TOO_LONG_NUMBER;
}

/**
 * The element re-serialised for the rejects file, or undefined when it cannot be (too deep for JSON.stringify) or a
 * value too long to hold was left out of it (json-token-bounds.ts).
 */
function rawOf(value: unknown): string | undefined {
  let leftOut = false;
  const raw = (() => {
    try {
      return JSON.stringify(value, (key, v: unknown) => {
        if (key === TOO_LONG_KEY || v === TOO_LONG_STRING || v === TOO_LONG_NUMBER) leftOut = true;
        return v;
      });
    } catch {
      return undefined;
    }
  })();
  return leftOut ? undefined : raw;
}

/**
 * stream-json assembles objects with `obj[key] = value`, so a `"__proto__"` member (valid JSON, hostile input)
 * became the record's prototype: its fields then looked inherited to some readers and vanished for others.
 * JSON.parse (NDJSON, whole files) keeps it an own member; this gives streamed records the same shape.
 */
function ownProtoMembers(value: unknown): void {
  if (value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const v of value) ownProtoMembers(v);
    return;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) {
    Object.setPrototypeOf(value, Object.prototype);
    Object.defineProperty(value, '__proto__', { value: proto, enumerable: true, writable: true, configurable: true });
  }
  for (const v of Object.values(value)) ownProtoMembers(v);
}

function elementItem(cfg: SourceConfig, index: number, value: unknown): SourceItem {
  const origin = { source: cfg.name, file: cfg.path, record: index + 1 };
  if (!isRecordObject(value)) {
    return rejectItem(origin, 'not-object', `element ${index} of the records array is ${kindOf(value)}, not an object`, rawOf(value));
  }
  const outOfBounds = recordBoundsViolation(value);
  if (outOfBounds !== undefined) {
    return rejectItem(origin, 'value-too-large', `element ${index} of the records array is too large: ${outOfBounds}`, rawOf(value));
  }
  ownProtoMembers(value); // after the depth bound: the walk is recursive
  return { ok: true, data: value, origin };
}

function recordsLabel(cfg: SourceConfig): string {
  return cfg.records === undefined ? 'the top-level value' : `\`records: ${cfg.records}\``;
}

const RECORDS_HINT =
  'Set `records` to the path of the array of records, e.g. `records: staff` or `records: data.patients` (a JSONata expression also works, for files up to 256 MiB).';

export async function* readJson(cfg: SourceConfig, signal?: AbortSignal, bytes?: ByteMeter): AsyncGenerator<SourceItem, void, undefined> {
  const segs = cfg.records === undefined ? undefined : parsePlainPath(cfg.records);
  if (cfg.records !== undefined && segs === undefined) {
    yield* readJsonWithJsonata(cfg, cfg.records, signal, bytes);
    return;
  }
  const opened = await openSourceFile(cfg);
  let yielded = false;
  try {
    for await (const item of streamJsonArray(cfg, opened, segs, signal, bytes)) {
      yielded = true;
      yield item;
    }
  } catch (err) {
    // The streamed path only steps through objects; `entry.resource` of a FHIR Bundle maps over the `entry`
    // array, which JSONata does: nothing was yielded yet, so the whole-document evaluation can take over — on a
    // regular file only (a FIFO is read once: opening it again would wait for a writer that is gone).
    if (yielded || cfg.records === undefined || !opened.isFile || !isRecordsNotFound(err) || opened.size > JSON_MAX_WHOLE_FILE_BYTES) throw err;
    // The document is in memory either way; the records are taken only if at least one is an object.
    const items: SourceItem[] = [];
    try {
      for await (const item of readJsonWithJsonata(cfg, cfg.records, signal, bytes)) items.push(item);
    } catch (again) {
      if (!(again instanceof CareEtlError) || !again.issues.some((i) => i.code === 'json-records')) throw again;
      throw err; // matched nothing that way either: the streamed reader's "not found" says more
    }
    if (!items.some((i) => i.ok)) throw err;
    yield* items;
  }
}

function isRecordsNotFound(err: unknown): boolean {
  return err instanceof CareEtlError && err.issues.some((i) => i.code === 'json-records') && / not found in the document$/.test(err.message);
}

async function* streamJsonArray(
  cfg: SourceConfig,
  opened: OpenedSource,
  segs: PathSegment[] | undefined,
  signal: AbortSignal | undefined,
  bytes: ByteMeter | undefined,
): AsyncGenerator<SourceItem, void, undefined> {
  const input = fileStream(opened, signal, bytes);
  const decoder = newDecoder();
  // A UTF-8 BOM decodes to U+FEFF, which stream-json's whitespace pattern (\s) skips.
  const parser = new BoundedJsonParser();
  const array = new StreamArray();
  let found: string | undefined;
  const stages: Readable[] = [input, decoder, parser];
  if (segs !== undefined) {
    stages.push(
      new Pick({
        filter: (stack, token) => {
          if (!stackMatches(stack, segs)) return false;
          found = token.name;
          return true;
        },
        once: true,
      }),
    );
  }
  let count = 0;
  pipeline([...stages, array], () => undefined);
  try {
    for await (const { key, value } of array as AsyncIterable<{ key: number; value: unknown }>) {
      count = key + 1;
      if (decoder.invalid.length > 0) throw invalidBytesError(cfg, decoder);
      yield elementItem(cfg, key, value);
    }
    if (decoder.invalid.length > 0) throw invalidBytesError(cfg, decoder);
    if (segs !== undefined && found === undefined) {
      throw sourceFatal(cfg, `${recordsLabel(cfg)} not found in the document`, { code: 'json-records', hint: RECORDS_HINT });
    }
  } catch (err) {
    // an invalid byte outside a string is also a syntax error: the encoding is the cause to report
    const invalid = invalidBytesError(cfg, decoder);
    if (invalid !== undefined && !isAbortError(err)) throw invalid;
    if (err instanceof DocumentTooDeep) {
      throw sourceFatal(cfg, `the document is ${err.message} (after record ${count}): not an array of records`, {
        code: 'json-syntax',
        record: count + 1,
      });
    }
    const message = err instanceof Error ? err.message : '';
    if (message === 'Top-level object should be an array.') {
      const kind = found === undefined ? 'not an array' : `${TOKEN_KIND[found] ?? found}, not an array`;
      throw sourceFatal(cfg, `${recordsLabel(cfg)} is ${kind}`, { code: 'json-records', hint: RECORDS_HINT });
    }
    if (message.startsWith('Parser ')) {
      // A FIFO cannot be read again to find where the extra text starts.
      const trailing = opened.isFile ? await findTrailingData(cfg.path).catch(() => undefined) : undefined;
      if (trailing) {
        throw sourceFatal(cfg, `trailing data after the complete top-level ${trailing.after}: a JSON file holds one document`, {
          code: 'json-syntax',
          line: trailing.line,
          column: trailing.column,
          cause: err,
          hint: 'Remove what follows the closing bracket, or, for one JSON value per line, use `format: ndjson`.',
        });
      }
      const where = count === 0 ? 'before the first record' : `after record ${count}`;
      throw sourceFatal(cfg, `invalid JSON ${where}: ${message.replace(/^Parser (cannot parse input: )?/, '')}`, {
        code: 'json-syntax',
        record: count + 1,
        cause: err,
      });
    }
    throw wrapReadError(cfg, err, { record: count + 1, what: 'JSON read error' });
  } finally {
    array.destroy();
    input.destroy();
  }
}

/** `records` is a JSONata expression that is not a plain path: evaluate it on the whole document. */
async function* readJsonWithJsonata(
  cfg: SourceConfig,
  expression: string,
  signal: AbortSignal | undefined,
  bytes?: ByteMeter,
): AsyncGenerator<SourceItem, void, undefined> {
  const { default: jsonata } = await import('jsonata');
  const { LINEAR_REGEX_ENGINE } = await import('../core/linear-regex.js');
  let compiled: ReturnType<typeof jsonata>;
  try {
    compiled = jsonata(expression, { RegexEngine: LINEAR_REGEX_ENGINE }); // a regex in `records` runs in linear time too
  } catch (err) {
    const e = err as { message?: string; position?: number };
    throw sourceFatal(
      cfg,
      `\`records\` is not a valid JSONata expression: ${e.message ?? String(err)}${e.position !== undefined ? ` (at character ${e.position})` : ''}`,
      {
        code: 'json-records',
        cause: err,
      },
    );
  }
  const opened = await openSourceFile(cfg);
  const tooLarge = (): Error =>
    sourceFatal(
      cfg,
      `file is larger than ${JSON_MAX_WHOLE_FILE_BYTES / 1024 / 1024} MiB: \`records: ${expression}\` is a JSONata expression, which needs the whole file in memory`,
      {
        code: 'source-too-large',
        hint: 'Use a plain path for `records` (e.g. `data.patients`), which is streamed, and filter records in the mapping instead.',
      },
    );
  if (opened.size > JSON_MAX_WHOLE_FILE_BYTES) {
    await opened.handle.close().catch(() => undefined);
    throw tooLarge();
  }
  let text: string;
  const input = fileStream(opened, signal, bytes);
  const decoder = newDecoder();
  pipeline(input, decoder, () => undefined);
  try {
    // Read with a running total: a FIFO reports no size up front.
    const chunks: Buffer[] = [];
    let total = 0;
    for await (const chunk of decoder as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (total > JSON_MAX_WHOLE_FILE_BYTES) throw tooLarge();
      chunks.push(chunk);
    }
    const invalid = invalidBytesError(cfg, decoder);
    if (invalid !== undefined) throw invalid;
    text = Buffer.concat(chunks).toString('utf8');
  } catch (err) {
    throw wrapReadError(cfg, err, { what: 'JSON read error' });
  } finally {
    input.destroy();
  }
  const doc = parseDocument(cfg, text);
  text = '';
  let result: unknown;
  try {
    result = await compiled.evaluate(doc);
  } catch (err) {
    // jsonata messages may quote a value from the document (PHI): only keep them when they do not.
    const e = err as { message?: string; code?: string; value?: unknown; position?: number };
    const reason = e.value === undefined ? (e.message ?? String(err)) : 'error';
    const at = e.position !== undefined ? ` (at character ${e.position})` : '';
    throw sourceFatal(cfg, `evaluating \`records: ${expression}\` failed: ${e.code ? `${e.code} ` : ''}${reason}${at}`, {
      code: 'json-records',
      cause: err,
    });
  }
  if (result === undefined) {
    throw sourceFatal(cfg, `${recordsLabel(cfg)} matched nothing in the document`, {
      code: 'json-records',
      hint: 'Check the expression; to accept an empty result, wrap it in an array constructor: `[ … ]`.',
    });
  }
  // JSONata returns a single match as the value itself, not a one-element array.
  const elements: readonly unknown[] = Array.isArray(result) ? result : [result];
  for (let i = 0; i < elements.length; i++) {
    signal?.throwIfAborted();
    yield elementItem(cfg, i, elements[i]);
  }
}

/** The whole document (`records:` as a JSONata expression); trailing data after it is named as such, at its line:col. */
function parseDocument(cfg: SourceConfig, text: string): unknown {
  const bom = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  try {
    return JSON.parse(bom ? text.slice(1) : text);
  } catch (err) {
    const m = err instanceof Error ? /at position (\d+)/.exec(err.message) : null;
    if (m && /non-whitespace character after JSON/.test((err as Error).message)) {
      const before = text.slice(0, Number(m[1]) + bom);
      const line = before.split('\n').length;
      throw sourceFatal(cfg, 'trailing data after the complete top-level value: a JSON file holds one document', {
        code: 'json-syntax',
        line,
        column: before.length - before.lastIndexOf('\n'),
        cause: err,
        hint: 'Remove what follows the closing bracket, or, for one JSON value per line, use `format: ndjson`.',
      });
    }
    throw sourceFatal(cfg, `invalid JSON${m ? ` at character ${Number(m[1]) + 1}` : ''}`, { code: 'json-syntax', cause: err });
  }
}
