/**
 * What `care-etl init` learns from sampled FHIR resources: their types, how they refer to patients and
 * practitioners (`Patient/123`, `urn:uuid:…`, `Practitioner?identifier=<system>|<value>`), and which
 * identifier types they carry. Only such shapes are kept (reference forms, identifier systems and type
 * codes), never an id, a name or any other value.
 */
import { isObj, type Obj } from '../core/is-object.js';

/** How a reference names its target: by id (`Type/id`, an absolute URL, `urn:uuid:id`) or by an identifier. */
export type RefForm = { kind: 'id' } | { kind: 'identifier'; system: string } | { kind: 'other' };

/** The reference fields that make care teams, by the resource holding them. */
const REFERENCE_FIELDS: Record<string, { field: string; label: string; target: 'Patient' | 'Practitioner'; refs: (r: Rec) => unknown[] }[]> = {
  Encounter: [
    { field: 'subject', label: 'Encounter.subject', target: 'Patient', refs: (r) => [get(r, 'subject', 'reference')] },
    {
      field: 'participant.individual',
      label: 'Encounter.participant.individual',
      target: 'Practitioner',
      refs: (r) => arr(r.participant).map((p) => get(p, 'individual', 'reference')),
    },
  ],
  CareTeam: [
    { field: 'subject', label: 'CareTeam.subject', target: 'Patient', refs: (r) => [get(r, 'subject', 'reference')] },
    {
      field: 'participant.member',
      label: 'CareTeam.participant.member',
      target: 'Practitioner',
      refs: (r) => arr(r.participant).map((p) => get(p, 'member', 'reference')),
    },
  ],
  PractitionerRole: [
    { field: 'practitioner', label: 'PractitionerRole.practitioner', target: 'Practitioner', refs: (r) => [get(r, 'practitioner', 'reference')] },
  ],
};

interface RefFacts {
  label: string;
  target: 'Patient' | 'Practitioner';
  /** Distinct forms seen, with counts. */
  forms: { form: RefForm; count: number }[];
}

export interface FhirFacts {
  /** resourceType → records of that type in the sample, in order of first appearance. */
  types: Record<string, number>;
  /** The records are the `entry[].resource` of a Bundle. */
  bundle: boolean;
  /** Reference forms per reference field (see REFERENCE_FIELDS) of the sampled records. */
  refs: RefFacts[];
  /** Identifier type codes seen (v2-0203: MR, SS, DL, PPN …), sorted. */
  identifierTypes: string[];
}

type Rec = Obj;
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : v === undefined ? [] : [v]);
function get(v: unknown, ...path: string[]): unknown {
  let cur = v;
  for (const k of path) cur = isObj(cur) ? cur[k] : undefined;
  return cur;
}

const ID = '[A-Za-z0-9\\-.]{1,64}';

/** The form of one reference string to a resource of type `target`. */
export function refForm(reference: string, target: string): RefForm {
  if (new RegExp(`^urn:uuid:${ID}$`).test(reference)) return { kind: 'id' };
  if (new RegExp(`^(?:[a-z][a-z0-9+.-]*://[^?#]*/)?${target}/${ID}(?:/_history/[^/]+)?$`, 'i').test(reference)) return { kind: 'id' };
  const cond = new RegExp(`^${target}\\?identifier=([^|&]+)\\|[^&]+$`).exec(reference);
  if (cond) return { kind: 'identifier', system: cond[1]! };
  return { kind: 'other' };
}

const sameForm = (a: RefForm, b: RefForm) => a.kind === b.kind && (a.kind !== 'identifier' || a.system === (b as { system: string }).system);

/** FHIR facts of sampled records, or undefined when they are not FHIR resources (no `resourceType`). */
export function fhirFacts(records: unknown[]): FhirFacts | undefined {
  let bundle = false;
  let resources = records.filter(isObj);
  if (resources.length && resources.every((r) => isObj(r.resource) && typeof r.resource.resourceType === 'string')) {
    bundle = true;
    resources = resources.map((r) => r.resource as Rec);
  }
  if (!resources.length || !resources.every((r) => typeof r.resourceType === 'string')) return undefined;

  const types: Record<string, number> = {};
  const refs = new Map<string, RefFacts>();
  const idTypes = new Set<string>();
  for (const r of resources) {
    const type = r.resourceType as string;
    types[type] = (types[type] ?? 0) + 1;
    for (const f of REFERENCE_FIELDS[type] ?? []) {
      let facts = refs.get(f.label);
      if (!facts) refs.set(f.label, (facts = { label: f.label, target: f.target, forms: [] }));
      for (const ref of f.refs(r)) {
        if (typeof ref !== 'string') continue;
        const form = refForm(ref, f.target);
        const seen = facts.forms.find((x) => sameForm(x.form, form));
        if (seen) seen.count++;
        else facts.forms.push({ form, count: 1 });
      }
    }
    for (const id of arr(r.identifier))
      for (const c of arr(get(id, 'type', 'coding'))) if (typeof get(c, 'code') === 'string') idTypes.add(get(c, 'code') as string);
  }
  return { types, bundle, refs: [...refs.values()], identifierTypes: [...idTypes].sort() };
}
