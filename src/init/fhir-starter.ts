/**
 * `care-etl init` for exports of FHIR R4 resources (NDJSON, a JSON array, a Bundle): the fields this API
 * accepts copied as they are (the maps of mappings/fhir-r4-bulk), keys and `$ref`s chosen from how the
 * files refer to each other (`Patient/<id>`, `urn:uuid:<id>`, `Practitioner?identifier=<system>|<NPI>`),
 * care teams built from encounters when there is no CareTeam file, and a comment — not a mapping — for
 * what this API has no resource for (PractitionerRole is a practitioner's specialty, not a practitioner).
 */
import { basename, extname } from 'node:path';
import type { WritableType } from '../schemas/resource-types.js';
import type { FhirFacts, RefForm } from './fhir-facts.js';
import type { ExportFacts } from './inspect-export.js';
import { todo, wrap, yamlScalar } from './yaml-text.js';

/** How the exports name the resources of one type when they refer to them: the key its mapping must use. */
type Keying = { kind: 'id' } | { kind: 'identifier'; system: string } | { kind: 'mixed'; seen: string };

/** One resource type read from one export. */
export interface FhirPart {
  fhirType: string;
  source: string;
  /** JSON: the `records` expression selecting this type. */
  records?: string;
  /** NDJSON holding several types: the map rejects the lines of other types. */
  guard: boolean;
}

export interface FhirCtx {
  patientName?: string;
  practitionerName?: string;
  keying: Record<'Patient' | 'Practitioner', Keying>;
  /** Exports holding PractitionerRole resources (as given to --from). */
  roleFiles: string[];
}

const FORM_TEXT = (type: string, f: RefForm) =>
  f.kind === 'id' ? `\`${type}/<id>\` or \`urn:uuid:<id>\`` : f.kind === 'identifier' ? `\`${type}?identifier=${f.system}|<value>\`` : 'another form';

/** The keying of `target` from every reference to it in the sampled exports (other forms, e.g. `#contained`, are skipped by the maps). */
export function keyingOf(target: 'Patient' | 'Practitioner', all: FhirFacts[]): Keying {
  const forms = all.flatMap((f) => f.refs.filter((r) => r.target === target).flatMap((r) => r.forms.map((x) => ({ label: r.label, form: x.form }))));
  const usable = forms.filter((f) => f.form.kind !== 'other');
  const sigs = new Set(usable.map((f) => (f.form.kind === 'identifier' ? `identifier ${f.form.system}` : f.form.kind)));
  if (sigs.size === 0) return { kind: 'id' };
  if (sigs.size === 1) return usable[0]!.form as Keying;
  const seen = [...new Set(usable.map((f) => `${f.label}: ${FORM_TEXT(target, f.form)}`))].join('; ');
  return { kind: 'mixed', seen };
}

const regexEscape = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/** A JSONata regex capturing the key of a `target` resource from a reference string. */
function keyRegex(target: string, k: Keying): string {
  if (k.kind === 'identifier') return `/^${target}\\?identifier=${regexEscape(k.system)}\\|(.+)$/`;
  return `/(?:^urn:uuid:|(?:^|\\/)${target}\\/)([A-Za-z0-9\\-.]{1,64})(?:\\/_history\\/[^\\/]+)?$/`;
}

/** JSONata: the key of the `target` resource a reference `expr` points to (undefined for any other reference). */
export function refKeyExpr(target: 'Patient' | 'Practitioner', k: Keying, expr: string): string {
  if (k.kind === 'mixed') {
    return todo(
      `the ${target.toLowerCase()} key from the reference ${expr}: these exports refer to a ${target} in several ways (${k.seen}); return the key the ${target.toLowerCase()} mapping uses`,
    );
  }
  return `$match(${expr}, ${keyRegex(target, k)}).groups[0]`;
}

/** The `key:` of a Patient or Practitioner mapping for that keying. */
export function keyOf(k: Keying): { expr: string; shown: string } {
  if (k.kind === 'identifier') return { expr: `identifier[system = ${JSON.stringify(k.system)}].value`, shown: `identifier ${k.system}` };
  return { expr: 'id', shown: 'id' };
}

// ------------------------------------------------------------------------------------------ parts

const base = (file: string) =>
  basename(file, extname(file))
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, '_')
    .replace(/^[^a-z]+/, '')
    .replace(/_+$/, '') || 'source';

function unique(name: string, taken: Set<string>): string {
  let n = name;
  for (let i = 2; taken.has(n); i++) n = `${name}-${i}`;
  taken.add(n);
  return n;
}

/** The resource types of one FHIR export, each with the source that reads it. */
export function fhirParts(facts: ExportFacts, taken: Set<string>): FhirPart[] {
  const fhir = facts.fhir!;
  const types = Object.entries(fhir.types);
  if (types.length === 1 && !fhir.bundle) return [{ fhirType: types[0]![0], source: unique(base(facts.path), taken), guard: false }];
  if (facts.format === 'json') {
    // A Bundle's records are its entries' resources; several types: one source per type, selected by `records` (a JSONata filter: the document is read whole, ≤ 256 MiB).
    const records = (t: string) => (fhir.bundle ? `entry.resource[resourceType = ${JSON.stringify(t)}]` : `$[resourceType = ${JSON.stringify(t)}]`);
    return types.map(([t]) => ({ fhirType: t, source: unique(`${base(facts.path)}_${t.toLowerCase()}`, taken), records: records(t), guard: false }));
  }
  const source = unique(base(facts.path), taken);
  return types.map(([t]) => ({ fhirType: t, source, guard: true }));
}

/** The API type a FHIR resource type becomes, or why it is not a mapping. */
export function apiTypeOf(fhirType: string, inputTypes: Set<string>): { type: WritableType; reason: string } | { note: string } {
  switch (fhirType) {
    case 'Patient':
    case 'Practitioner':
      return { type: fhirType, reason: `FHIR ${fhirType} resources` };
    case 'CareTeam':
      return inputTypes.has('Patient')
        ? { type: 'CareTeam', reason: 'FHIR CareTeam resources' }
        : { note: 'care teams belong to patients, and no Patient export was given: add it with --from and run init again' };
    case 'Encounter':
      if (inputTypes.has('CareTeam'))
        return {
          note: 'not a mapping: the CareTeam export already gives the care teams (a second CareTeam mapping built from encounters would load each team twice)',
        };
      if (!inputTypes.has('Patient'))
        return { note: 'care teams are built from encounters per patient, and no Patient export was given: add it with --from and run init again' };
      return { type: 'CareTeam', reason: "this API has no Encounter: a patient's encounters make its care team" };
    case 'PractitionerRole':
      return {
        note: inputTypes.has('Practitioner')
          ? "not a mapping: this API has no PractitionerRole, and its practitioners are those of the Practitioner export (a second Practitioner mapping would load each of them twice). It holds each practitioner's specialty: see the comment in the practitioner map"
          : 'not a mapping: this API has no PractitionerRole, and a role is not a practitioner; give the Practitioner export too (--from) — the roles hold their specialties',
      };
    default:
      return { note: `not loaded: this API holds Patient, Practitioner and CareTeam only (no ${fhirType})` };
  }
}

// ------------------------------------------------------------------------------------------ maps

/** Identifier types (v2-0203) a care platform has no use for: national identifiers. */
const NATIONAL_ID_TYPES: Record<string, string> = { SS: 'social security number', DL: "driver's licence", PPN: 'passport number' };

function patientMap(fhir: FhirFacts): string[] {
  const national = Object.keys(NATIONAL_ID_TYPES).filter((t) => fhir.identifierTypes.includes(t));
  const filter = national.length ? `value and $not($exists(type.coding[code in [${national.map((t) => JSON.stringify(t)).join(', ')}]]))` : 'value';
  return [
    '{',
    ...(national.length ? [`  /* left out: ${national.map((t) => `${NATIONAL_ID_TYPES[t]}s (${t})`).join(', ')} — a care platform needs none */`] : []),
    `  "identifier": [identifier[${filter}].{ "system": system, "value": value }],`,
    '  "active": active,',
    '  "name": [name.{ "use": use, "family": family, "given": [given], "prefix": [prefix] }],',
    '  "telecom": [telecom[value].{ "system": system, "value": value, "use": use }],',
    '  "gender": gender,',
    '  "birthDate": birthDate,',
    '  "address": [address.{',
    '    "use": use, "type": type, "text": text, "line": [line], "city": city, "state": state,',
    '    "postalCode": postalCode, "country": country, "period": period.{ "start": start, "end": end }',
    '  }],',
    '  "extension": [extension[$exists(valueString)].{ "url": url, "valueString": valueString }],',
    '  "managingOrganization": managingOrganization.identifier.{ "identifier": { "system": system, "value": value } }',
    '}',
  ];
}

function practitionerMap(ctx: FhirCtx): string[] {
  const roles = ctx.roleFiles.length
    ? [
        `  /* The specialty is in ${ctx.roleFiles.join(', ')} (PractitionerRole.specialty, one role per practitioner and`,
        '     organization), not in Practitioner. To send it as the staff-role extension',
        '',
        '       "extension": [{ "url": "<your staff roles URL>", "valueString": <the specialty of this practitioner> }],',
        '',
        '     read PractitionerRole through a lookup keyed by the practitioner (PractitionerRole.practitioner.reference):',
        '     mappings/synthea-fhir/mapping.yaml does exactly this. */',
      ]
    : [];
  return [
    '{',
    ...roles,
    '  "identifier": [identifier[value].{ "system": system, "value": value }],',
    '  "active": active,',
    '  "name": [name.{ "use": use, "family": family, "given": [given], "prefix": [prefix] }],',
    '  "telecom": [telecom[value].{ "system": system, "value": value, "use": use }],',
    '  "gender": gender,',
    '  "birthDate": birthDate,',
    '  "qualification": [qualification[code].{',
    '    "code": code.{ "coding": [coding.{ "system": system, "code": code, "display": display }], "text": text }',
    '  }],',
    '  "extension": [extension[$exists(valueString)].{ "url": url, "valueString": valueString }]',
    '}',
  ];
}

function keyFunctions(ctx: FhirCtx): string[] {
  return [
    `  $patient := function($r) { ${refKeyExpr('Patient', ctx.keying.Patient, '$r')} };`,
    `  $practitioner := function($r) { ${refKeyExpr('Practitioner', ctx.keying.Practitioner, '$r')} };`,
  ];
}

const NO_PRACTITIONERS = (what: string) =>
  todo(
    `${what} refer to practitioners, but no Practitioner export was given to init: add it (--from) and run init again, or write [] to load care teams without members`,
  );

function careTeamMap(ctx: FhirCtx): string[] {
  const participants = ctx.practitionerName
    ? [
        '    "participant": [participant[$practitioner(member.reference)].{',
        '      "role": [role.{',
        '        "coding": coding',
        '          ? [coding.{ "system": system, "code": code, "display": display }]',
        '          : (text ? [{ "display": text }])',
        '      }],',
        `      "member": { "reference": $ref(${JSON.stringify(ctx.practitionerName)}, $practitioner(member.reference)) },`,
        '      "period": period.{ "start": start, "end": end }',
        '    }]',
      ]
    : [`    "participant": ${NO_PRACTITIONERS('CareTeam participants')}`];
  return [
    '(',
    ...keyFunctions(ctx),
    '  $subject := $patient(subject.reference);',
    '  $subject ? {',
    '    "status": status,',
    '    "name": name,',
    `    "subject": { "reference": $ref(${JSON.stringify(ctx.patientName)}, $subject) },`,
    '    "period": period.{ "start": start, "end": end },',
    ...participants,
    '  } : $error("the care team\'s subject is not a Patient (" & (subject.reference ? "`" & subject.reference & "`" : "none") & "): this API only keeps care teams of a patient")',
    ')',
  ];
}

function encounterCareTeamMap(ctx: FhirCtx): string[] {
  const participants = ctx.practitionerName
    ? [
        '    "participant": [$each($visits{ member: [start] }, function($starts, $member) {{',
        '      /* a role needs the specialty, which is in PractitionerRole: see mappings/synthea-fhir/mapping.yaml */',
        `      "member": { "reference": $ref(${JSON.stringify(ctx.practitionerName)}, $member) },`,
        '      "period": { "start": $first($starts) }',
        '    }})]',
      ]
    : [`    "participant": ${NO_PRACTITIONERS('Encounter participants')}`];
  return [
    '(',
    ...keyFunctions(ctx),
    '  $iso := "[Y0001]-[M01]-[D01]T[H01]:[m01]:[s01]Z";',
    '  $first := function($starts) { $fromMillis($min($starts.$toMillis($)), $iso) };',
    '  $subject := $patient($[0].subject.reference);',
    "  /* every practitioner of the patient's encounters, with the start of each encounter */",
    '  $visits := $.(',
    '    $start := period.start;',
    '    participant[$practitioner(individual.reference)].{ "member": $practitioner(individual.reference), "start": $start }',
    '  );',
    '  {',
    '    "status": "active",',
    '    "name": "Care team of patient " & $subject,',
    `    "subject": { "reference": $ref(${JSON.stringify(ctx.patientName)}, $subject) },`,
    '    "period": { "start": $first($.period.start) },',
    ...participants,
    '  }',
    ')',
  ];
}

/** The map of a part, wrapped in a type check when the file mixes types. */
function guarded(part: FhirPart, type: WritableType, map: string[]): string[] {
  if (!part.guard) return map;
  return [
    `/* this file holds several resource types: the lines that are not ${part.fhirType} are rejected by this mapping */`,
    `resourceType = ${JSON.stringify(part.fhirType)} ? ${map[0]}`,
    ...map.slice(1),
    `: $error("line holds a " & resourceType & ", not a ${part.fhirType}: this mapping (${type}) reads only the ${part.fhirType} lines")`,
  ];
}

interface FhirBlock {
  key?: string;
  groupBy?: string;
  yaml: string[];
}

/**
 * The FHIR elements the maps below read from a resource of each type (`id` and `resourceType` aside): all are
 * optional in FHIR, so the source lists them under `optional:` and an export that leaves one out of its first
 * records still passes the column contract (docs/column-contract.md). Keep in step with the maps.
 */
const OPTIONAL_ELEMENTS: Record<string, readonly string[]> = {
  Patient: ['identifier', 'active', 'name', 'telecom', 'gender', 'birthDate', 'address', 'extension', 'managingOrganization'],
  Practitioner: ['identifier', 'active', 'name', 'telecom', 'gender', 'birthDate', 'qualification', 'extension'],
  CareTeam: ['subject', 'status', 'name', 'period', 'participant'],
  Encounter: ['subject', 'period', 'participant'],
};

/** The `optional:` fields of a source holding resources of these FHIR types (in first-use order). */
export function fhirOptionalElements(fhirTypes: readonly string[]): string[] {
  return [...new Set(fhirTypes.flatMap((t) => OPTIONAL_ELEMENTS[t] ?? []))];
}

/** The YAML of one mapping (after `- name:`): type, from, key or groupBy, match, map. */
export function fhirMappingYaml(part: FhirPart, type: WritableType, facts: ExportFacts, ctx: FhirCtx): FhirBlock {
  const y = [`    type: ${type}`, `    from: ${part.source}`];
  let map: string[];
  let key: string | undefined;
  let groupBy: string | undefined;
  if (part.fhirType === 'Encounter') {
    groupBy = 'subject (patient)';
    y.push(`    groupBy: ${yamlScalar(refKeyExpr('Patient', ctx.keying.Patient, 'subject.reference'))}    # every encounter of a patient → one care team`);
    y.push('    match: subject.reference     # one care team per patient: how to find it again on the server');
    map = encounterCareTeamMap(ctx);
  } else {
    const k = type === 'Patient' || type === 'Practitioner' ? keyOf(ctx.keying[type]) : { expr: 'id', shown: 'id' };
    key = k.shown;
    const why = type === 'Patient' || type === 'Practitioner' ? keyComment(type, ctx.keying[type]) : '';
    y.push(`    key: ${yamlScalar(k.expr)}${why}`);
    map = type === 'Patient' ? patientMap(facts.fhir!) : type === 'Practitioner' ? practitionerMap(ctx) : careTeamMap(ctx);
  }
  y.push('    map: |', ...guarded(part, type, map).map((l) => (l ? `      ${l}` : '')));
  return { key, groupBy, yaml: y };
}

function keyComment(type: 'Patient' | 'Practitioner', k: Keying): string {
  if (k.kind === 'identifier') return `    # the other exports refer to a ${type.toLowerCase()} by this identifier`;
  if (k.kind === 'mixed') return '    # check: the other exports refer to it in several ways (see the TODO in the care-team map)';
  return `    # the source id: the server assigns new ids, and \`$ref\` turns references to it into them`;
}

/** Header lines pointing at the ready-made FHIR mappings. */
export function fhirHeader(types: string[], fhirBulk: string, syntheaFhir: string): string[] {
  return [
    `# These exports hold FHIR R4 resources (${types.join(', ')}).`,
    '# care-etl ships ready-made mappings for them (mappings/README.md), to run as they are or to copy:',
    `#   ${fhirBulk}`,
    '#     Patient, Practitioner and CareTeam NDJSON (Bulk Data $export);',
    `#   ${syntheaFhir}`,
    "#     Synthea's Patient, Practitioner, PractitionerRole and Encounter NDJSON: care teams from encounters,",
    '#     practitioners found by NPI, the specialty from PractitionerRole.',
    '# The maps below follow them: the fields this API accepts are copied as they are, the rest is dropped.',
    '#',
  ];
}

/** The comment above a mapping, or standing for a part that is not one: `<file> → <what>: <why>.` */
export function fhirHeadline(shown: string, part: FhirPart, what: string): string[] {
  return wrap(`${shown}${part.records || part.guard ? ` (its ${part.fhirType} resources)` : ''} → ${what}.`, 106).map((l) => `  # ${l}`);
}
