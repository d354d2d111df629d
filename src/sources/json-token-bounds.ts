import { StreamJsonParser } from '../core/stream-json-package.js';
import { TOO_LONG_KEY, TOO_LONG_NUMBER, TOO_LONG_STRING } from './record-bounds.js';
import { RECORD_MAX_DEPTH, RECORD_MAX_TEXT_CHARS } from './types.js';

/*
 * stream-json's parser with bounds on what it holds. It packs a string, key or number whole before handing it on: a
 * 100 MB string was held whole (and the element built from it: 312 MB to reject it), a longer one runs into V8's
 * longest string; nesting grows its stack and the element without end (a million levels: 200 MB). Here a text, key or
 * number longer than JSON_MAX_TOKEN_CHARS (checked after each chunk read) is dropped as it comes and handed on as a marker its element is rejected
 * for (record-bounds.ts); a document nested deeper than JSON_MAX_DOCUMENT_DEPTH stops the read. Streaming the
 * values in chunks instead (the parser's `packValues: false`) cost 1.15 – 1.3x the CPU of reading a JSON file.
 */

/** Characters of one text, key or number held (a longer one is a marker, its element a reject, as it would be anyway). */
const JSON_MAX_TOKEN_CHARS = RECORD_MAX_TEXT_CHARS;
/** Nesting beyond which a document is refused whole (elements deeper than RECORD_MAX_DEPTH are rejects). */
export const JSON_MAX_DOCUMENT_DEPTH = 1024 * RECORD_MAX_DEPTH;

/** The parser's error for a document nested deeper than JSON_MAX_DOCUMENT_DEPTH. */
export class DocumentTooDeep extends Error {
  constructor() {
    super(`nested deeper than ${JSON_MAX_DOCUMENT_DEPTH} levels`);
  }
}

interface Token {
  name: string;
  value?: unknown;
}

/** What of stream-json's parser this reads: its value accumulator (a string per token), checked after each chunk. */
interface ParserInternals {
  _accumulator: string;
  _processBuffer(callback: (err?: Error | null) => void): void;
}

export class BoundedJsonParser extends StreamJsonParser {
  /** The value being packed grew past the bound: what is packed of it is dropped, it comes out as a marker. */
  private tooLong = false;
  private depth = 0;

  constructor() {
    super({ streamValues: false });
    const self = this as unknown as ParserInternals;
    const processBuffer = self._processBuffer.bind(this);
    self._processBuffer = (callback) =>
      processBuffer((err) => {
        if (self._accumulator.length > JSON_MAX_TOKEN_CHARS) {
          this.tooLong = true;
          self._accumulator = '';
        }
        callback(err);
      });
  }

  override push(token: Token | null, encoding?: BufferEncoding): boolean {
    if (this.destroyed) return false; // the rest of the chunk the parser is in, after a document too deep
    if (token === null) return super.push(null, encoding);
    switch (token.name) {
      case 'stringValue':
      case 'keyValue':
      case 'numberValue':
        if (!this.tooLong) return super.push(token);
        this.tooLong = false;
        if (token.name === 'keyValue') return super.push({ name: 'keyValue', value: TOO_LONG_KEY });
        // a number too: the assembler would parseFloat a numberValue
        return super.push({ name: 'stringValue', value: token.name === 'numberValue' ? TOO_LONG_NUMBER : TOO_LONG_STRING });
      case 'startObject':
      case 'startArray':
        if (++this.depth > JSON_MAX_DOCUMENT_DEPTH) {
          this.destroy(new DocumentTooDeep());
          return false;
        }
        return super.push(token);
      case 'endObject':
      case 'endArray':
        this.depth--;
        return super.push(token);
      default:
        return super.push(token);
    }
  }
}
