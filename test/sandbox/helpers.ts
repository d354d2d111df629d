import { Readable } from 'node:stream';
import { Agent, request } from 'undici';
import type { Sandbox } from '../../src/sandbox/server.js';

export const STAFF_ROLES_URL = 'https://care-etl.dev/fhir/StructureDefinition/staff-role';

/** Bodies shaped like the spec's usage examples. */
export const samplePatient = (): Record<string, unknown> => ({
  resourceType: 'Patient',
  identifier: [{ system: 'urn:emr:mrn', value: '00123' }],
  active: true,
  name: [{ use: 'official', family: 'Doe', given: ['Jane', 'Q'] }],
  telecom: [{ system: 'phone', value: '+1 555 0100', use: 'mobile' }],
  gender: 'female',
  birthDate: '1970-01-31',
  address: [
    { use: 'home', type: 'physical', line: ['1 Main St'], city: 'Springfield', state: 'IL', postalCode: '01234', country: 'US', period: { start: '2020' } },
  ],
  extension: [{ url: 'https://example.org/ext/preferred-language', valueString: 'en' }],
  managingOrganization: { identifier: { system: 'urn:emr:org', value: 'clinic-1' } },
});

export const samplePractitioner = (): Record<string, unknown> => ({
  resourceType: 'Practitioner',
  extension: [{ url: STAFF_ROLES_URL, valueString: 'Therapist' }],
  identifier: [{ system: 'http://hl7.org/fhir/sid/us-npi', value: '1234567890' }],
  active: true,
  name: [{ use: 'official', family: 'Smith', given: ['Ann'], prefix: ['Dr.'] }],
  telecom: [{ system: 'email', value: 'ann.smith@example.org', use: 'work' }],
  gender: 'female',
  birthDate: '1980-05',
  qualification: [
    { code: { text: 'Licensed Clinical Social Worker' }, language: { coding: [{ system: 'urn:ietf:bcp:47', code: 'en' }], text: 'English' }, preferred: true },
  ],
});

export const sampleCareTeam = (patientId: string, practitionerId: string): Record<string, unknown> => ({
  resourceType: 'CareTeam',
  status: 'active',
  name: 'Primary team',
  subject: { reference: `Patient/${patientId}` },
  period: { start: '2024-01-15' },
  participant: [
    {
      role: [{ coding: [{ system: STAFF_ROLES_URL, code: 'therapist', display: 'Therapist' }] }],
      member: { reference: `Practitioner/${practitionerId}` },
      period: { start: '2024-01-15T09:00:00Z' },
    },
  ],
});

export interface Resp {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
  text: string;
}

export interface CallOptions {
  body?: unknown;
  raw?: string | Buffer | AsyncIterable<Buffer>;
  tenant?: string;
  headers?: Record<string, string>;
  /** Replace the auth headers entirely (to test 401/403). */
  auth?: Record<string, string>;
  /** Aborts the request (the client goes away). */
  signal?: AbortSignal;
}

/** A keep-alive client for one sandbox; `path` may be relative ("/Patient") or an absolute link URL. */
export function client(sb: Sandbox) {
  const agent = new Agent({ connections: 8, headersTimeout: 10_000, bodyTimeout: 10_000 });
  const authFor = (tenant: string): Record<string, string> => ({
    'Service-SubscriptionKey': sb.credentials.apiKey,
    'Service-EmrId': sb.credentials.emrId,
    'Service-TenantId': tenant,
  });
  async function call(method: string, path: string, o: CallOptions = {}): Promise<Resp> {
    const headers: Record<string, string> = { ...(o.auth ?? authFor(o.tenant ?? sb.credentials.tenants[0]!)), ...o.headers };
    let body: string | Buffer | Readable | undefined =
      o.raw === undefined || typeof o.raw === 'string' || Buffer.isBuffer(o.raw) ? o.raw : Readable.from(o.raw);
    if (o.body !== undefined) body = JSON.stringify(o.body);
    if (body !== undefined) headers['Content-Type'] ??= 'application/json';
    const res = await request(path.startsWith('http') ? path : sb.url + path, {
      method: method as 'GET',
      headers,
      body,
      dispatcher: agent,
      signal: o.signal,
    });
    const text = await res.body.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.statusCode, headers: res.headers, body: parsed, text };
  }
  return {
    call,
    authFor,
    create: async (type: string, body: unknown, tenant?: string) => {
      const r = await call('POST', `/${type}`, { body, tenant });
      if (r.status !== 200) throw new Error(`create ${type} → ${r.status} ${r.text}`);
      return r.body as Record<string, unknown> & { id: string; meta: { versionId: string; lastUpdated: string; source: string } };
    },
    close: () => agent.close(),
  };
}

/** The JSON-pointer paths named by an OperationOutcome. */
export const paths = (outcome: { issue: { expression?: string[] }[] }): string[] => outcome.issue.flatMap((i) => i.expression ?? []);
