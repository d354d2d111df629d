/**
 * HTTP plumbing of the sandbox: FHIR-style error bodies (OperationOutcome), answers counted by status, bounded
 * body reading and JSON object parsing. Diagnostics never quote body content (patient data).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Issue } from '../core/issues.js';
import { isObj } from '../core/is-object.js';

export type Json = Record<string, unknown>;
const JSON_TYPE = 'application/json; charset=utf-8';

/** One OperationOutcome issue; `expression` holds a JSON pointer into the request body. */
export interface OOIssue {
  severity: 'error';
  code: string;
  diagnostics: string;
  expression?: string[];
}

export const oo = (code: string, diagnostics: string, path?: string): OOIssue =>
  path === undefined ? { severity: 'error', code, diagnostics } : { severity: 'error', code, diagnostics, expression: [path] };

/** ajv keyword → FHIR issue-type code. */
const FHIR_CODE: Record<string, string> = {
  required: 'required',
  additionalProperties: 'structure',
  type: 'structure',
  'too-many-issues': 'too-costly',
};
export const fromIssue = (i: Issue): OOIssue => oo(FHIR_CODE[i.code] ?? 'value', i.message, i.path);

/** Short, non-PHI description of a client-sent value for messages (type names, ids). */
export const show = (v: unknown): string =>
  typeof v === 'string' ? JSON.stringify(v.length > 64 ? `${v.slice(0, 64)}…` : v) : v === undefined ? 'nothing' : typeof v;

/** Sends every answer of one sandbox and counts them by status (its `stats().byStatus`). */
export class Replies {
  constructor(
    private readonly byStatus: Record<string, number>,
    private readonly limits: { maxBody: number; maxDepth: number },
  ) {}

  send(res: ServerResponse, status: number, body: string, headers?: Record<string, string>): void {
    this.byStatus[status] = (this.byStatus[status] ?? 0) + 1;
    res.writeHead(status, { 'Content-Type': JSON_TYPE, 'Content-Length': String(Buffer.byteLength(body)), ...headers });
    res.end(body);
  }

  fail(res: ServerResponse, status: number, issues: OOIssue[], headers?: Record<string, string>): void {
    this.send(res, status, JSON.stringify({ resourceType: 'OperationOutcome', issue: issues }), headers);
  }

  /** The body, or undefined when it was already answered (413) or the client went away. */
  readBody(req: IncomingMessage, res: ServerResponse): Promise<Buffer | undefined> {
    const { maxBody } = this.limits;
    if (Number(req.headers['content-length']) > maxBody) {
      this.tooLarge(req, res);
      return Promise.resolve(undefined);
    }
    return new Promise((resolve) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const onData = (c: Buffer): void => {
        size += c.length;
        if (size > maxBody) {
          req.off('data', onData);
          chunks.length = 0;
          this.tooLarge(req, res);
          resolve(undefined);
          return;
        }
        chunks.push(c);
      };
      req.on('data', onData);
      req.on('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size)));
      req.on('close', () => resolve(undefined));
      req.on('error', () => resolve(undefined));
    });
  }

  /** Parses a JSON object body or answers 400. */
  parseObject(res: ServerResponse, buf: Buffer): Json | undefined {
    let body: unknown;
    try {
      body = JSON.parse(buf.toString('utf8'));
    } catch (e) {
      // V8 messages may quote the body: keep only the position, the body can hold patient data.
      const pos = /position (\d+)/.exec(String((e as Error).message))?.[1];
      this.fail(res, 400, [oo('structure', `request body is not valid JSON${pos ? ` (error at position ${pos})` : ''}`)]);
      return undefined;
    }
    if (!isObj(body)) {
      this.fail(res, 400, [oo('structure', `request body must be a JSON object, got ${Array.isArray(body) ? 'an array' : show(body)}`)]);
      return undefined;
    }
    // Client input never reaches the recursive code (merge patch, validation, serialisation) unbounded: a 400, not a 500.
    if (deeperThan(body, this.limits.maxDepth)) {
      this.fail(res, 400, [oo('too-costly', `request body is nested deeper than ${this.limits.maxDepth} levels`)]);
      return undefined;
    }
    return body;
  }

  private tooLarge(req: IncomingMessage, res: ServerResponse): void {
    const { maxBody } = this.limits;
    this.fail(res, 413, [oo('too-long', `request body exceeds the limit of ${maxBody} bytes`)], { Connection: 'close' });
    // Discard (never buffer) the rest so the client can finish sending and read the 413; cut off a body
    // that keeps coming far past the limit.
    let drained = 0;
    req.on('data', (c: Buffer) => {
      drained += c.length;
      if (drained > 16 * maxBody) req.socket.destroy();
    });
    req.resume();
  }
}

/** Whether a parsed JSON value nests objects/arrays deeper than `max` (iterative: any depth is safe to test). */
function deeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (d > max) return true;
    for (const x of Array.isArray(v) ? v : Object.values(v)) if (x !== null && typeof x === 'object') stack.push([x, d + 1]);
  }
  return false;
}
