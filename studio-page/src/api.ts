// The page's calls to `care-etl studio` (same origin, bearer token from the URL the command printed).
import type { Evaluation, EvaluateRequest, MappingFile } from './types.js';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
  ) {
    super(typeof body.error === 'string' ? body.error : `HTTP ${status}`);
  }
}

/**
 * The token comes in the printed URL (`/?token=…`). It is kept in sessionStorage so that a reload of the tab still
 * works, and taken out of the address bar so that it does not end up in the history or a screenshot.
 */
export function readToken(): string {
  const fromUrl = new URLSearchParams(location.search).get('token');
  if (fromUrl) {
    sessionStorage.setItem('care-etl-studio-token', fromUrl);
    history.replaceState(null, '', location.pathname);
    return fromUrl;
  }
  return sessionStorage.getItem('care-etl-studio-token') ?? '';
}

export interface StudioApi {
  mapping(): Promise<MappingFile>;
  evaluate(req: EvaluateRequest, signal?: AbortSignal): Promise<Evaluation>;
  save(text: string, baseHash: string): Promise<{ saved: true; hash: string }>;
  addTestCase(text: string, resource: string, index: number): Promise<{ file: string; name: string }>;
}

export function studioApi(token: string): StudioApi {
  async function call<T>(method: 'GET' | 'POST', path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const res = await fetch(path, {
      method,
      signal,
      cache: 'no-store',
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    if (!res.ok) throw new ApiError(res.status, json);
    return json as T;
  }
  return {
    mapping: () => call('GET', '/api/mapping'),
    evaluate: (req, signal) => call('POST', '/api/evaluate', req, signal),
    save: (text, baseHash) => call('POST', '/api/save', { text, baseHash }),
    addTestCase: (text, resource, index) => call('POST', '/api/test-case', { text, resource, index }),
  };
}
