/**
 * `care-etl init`: a starter mapping for the given export files. One resource mapping per export, its
 * type guessed from the file name and columns (MRN → Patient, NPI → Practitioner, both → CareTeam), every
 * column listed in the `map` as a commented field to fill in, and a `$TODO("…")` marker wherever a decision
 * is needed — `care-etl validate` reports each one, with its text and position, until it is replaced (the
 * count printed here is theirs: src/mapping/todo-markers.ts). Exports of FHIR resources are read as such
 * (fhir-starter.ts).
 */
import { constants } from 'node:fs';
import { copyFile, writeFile } from 'node:fs/promises';
import { basename, dirname, extname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CareEtlError, ExitCode, issue } from '../core/issues.js';
import { findTodoMarkers } from '../mapping/todo-markers.js';
import type { WritableType } from '../schemas/resource-types.js';
import { inspectExport, isSexColumn, normalizeColumn, type ColumnFacts, type ExportFacts } from './inspect-export.js';
import type { NotUtf8 } from './sniff-encoding.js';
import { omopHeader, omopLookupLines, omopMappingYaml, omopPlanOf, omopTableOf, type OmopCtx, type OmopTable } from './omop-starter.js';
import {
  apiTypeOf,
  fhirHeader,
  fhirHeadline,
  fhirMappingYaml,
  fhirOptionalElements,
  fhirParts,
  keyingOf,
  type FhirCtx,
  type FhirPart,
} from './fhir-starter.js';
import { field, relativeFrom, todo, wrap, yamlScalar } from './yaml-text.js';

export { field } from './yaml-text.js';

export const MAPPING_SCHEMA_PATH = fileURLToPath(new URL('../../schemas/mapping.schema.json', import.meta.url));
/**
 * The mapping's `$schema` (editor completion): a copy of care-etl's schema written beside it, so the path still
 * resolves once the folder is committed and cloned elsewhere, offline too (docs/mapping.md "Editor completion").
 */
export const SCHEMA_COPY = 'mapping.schema.json';
export const NPI_SYSTEM = 'http://hl7.org/fhir/sid/us-npi';
const MAPPINGS_DIR = fileURLToPath(new URL('../../mappings/', import.meta.url));

export interface StarterOptions {
  /** Export files (CSV, JSON, NDJSON). */
  from: string[];
  /** The mapping file to write (default `mapping.yaml`); source paths are written relative to its folder. */
  out?: string;
  /** Base of relative paths (default `process.cwd()`). */
  cwd?: string;
}

export interface StarterResource {
  file: string;
  source: string;
  name: string;
  type?: WritableType;
  /** Why this type was chosen (or why none was). */
  reason: string;
  key?: string;
  groupBy?: string;
}

/** An export (or the resources of one type in it) that is not a mapping, and why. */
export interface StarterNote {
  file: string;
  resourceType: string;
  note: string;
}

export interface StarterResult {
  out: string;
  text: string;
  resources: StarterResource[];
  notes: StarterNote[];
  /** The exports hold FHIR resources: the ready-made mappings the file points to (absolute paths). */
  readyMade?: string[];
  /** OMOP CDM tables recognised among the exports (the file points to mappings/omop-cdm). */
  omopTables?: OmopTable[];
  /** `$TODO("…")` markers left to resolve: exactly the `todo` issues `care-etl validate` reports. */
  todos: number;
  /** The schema copy beside the mapping (`SCHEMA_COPY`), when this call wrote it (an existing one is kept unless `force`). */
  schemaCopy?: string;
}

// ------------------------------------------------------------------------------------------ column roles

type Role =
  | 'first'
  | 'middle'
  | 'last'
  | 'prefix'
  | 'fullname'
  | 'dob'
  | 'sex'
  | 'phone'
  | 'mobile'
  | 'workphone'
  | 'fax'
  | 'email'
  | 'addr1'
  | 'addr2'
  | 'city'
  | 'state'
  | 'zip'
  | 'country'
  | 'active'
  | 'role'
  | 'qualification'
  | 'start'
  | 'end';

const ROLE_NAMES: Record<Role, string[]> = {
  first: ['first', 'firstname', 'givenname', 'given', 'fname', 'forename'],
  middle: ['middle', 'middlename', 'mname', 'middleinitial'],
  last: ['last', 'lastname', 'familyname', 'family', 'surname', 'lname'],
  prefix: ['prefix', 'title', 'salutation'],
  fullname: ['name', 'fullname', 'displayname', 'providername', 'patientname', 'staffname'],
  dob: ['dob', 'birthdate', 'dateofbirth', 'birthday', 'birthdt', 'dobdate'],
  sex: ['sex', 'gender', 'administrativegender', 'sexcode', 'gendercode'],
  phone: ['phone', 'phonenumber', 'telephone', 'tel', 'homephone', 'phonehome', 'primaryphone'],
  mobile: ['mobile', 'mobilephone', 'cell', 'cellphone', 'phonemobile', 'phonecell'],
  workphone: ['workphone', 'phonework', 'officephone', 'businessphone'],
  fax: ['fax', 'faxnumber'],
  email: ['email', 'emailaddress', 'mail'],
  addr1: ['address', 'address1', 'addressline1', 'street', 'streetaddress', 'line1', 'addr1', 'addr'],
  addr2: ['address2', 'addressline2', 'line2', 'addr2', 'apt', 'suite'],
  city: ['city', 'town'],
  state: ['state', 'province', 'region', 'stateprovince'],
  zip: ['zip', 'zipcode', 'postalcode', 'postcode'],
  country: ['country', 'countrycode'],
  active: ['active', 'isactive', 'enabled'],
  role: ['role', 'staffrole', 'position', 'jobtitle', 'speciality', 'specialty', 'discipline', 'providertype'],
  qualification: ['credentials', 'credential', 'degree', 'qualification', 'qualifications'],
  start: ['start', 'startdate', 'from', 'fromdate', 'begin', 'begindate', 'assigned', 'assigneddate', 'since', 'effectivedate'],
  end: ['end', 'enddate', 'stop', 'to', 'todate', 'until', 'thru', 'through', 'discharged', 'dischargedate'],
};

const PATIENT_KEYS = ['mrn', 'medicalrecordnumber', 'patientmrn', 'patientid', 'patientnumber', 'clientid', 'clientnumber', 'chartnumber', 'chartno', 'id'];
const PRACTITIONER_KEYS = ['npi', 'providernpi', 'practitionernpi', 'providerid', 'practitionerid', 'staffid', 'clinicianid', 'employeeid', 'id'];
const CARETEAM_PATIENT = ['mrn', 'patientmrn', 'patientid', 'patient', 'patientnumber', 'chartnumber', 'medicalrecordnumber'];
const CARETEAM_MEMBER = [
  'npi',
  'providernpi',
  'practitionernpi',
  'provider',
  'providerid',
  'practitioner',
  'practitionerid',
  'clinician',
  'clinicianid',
  'staffid',
];

const findColumn = (cols: ColumnFacts[], names: string[]) => {
  for (const n of names) {
    const c = cols.find((col) => normalizeColumn(col.name) === n);
    if (c) return c;
  }
  return undefined;
};

/**
 * A key (or groupBy / member) column must hold values: one empty in every sampled record is never chosen
 * (an OMOP `npi` column, an MRN column the clinic does not fill). With no record sampled, every column may be.
 */
const findKeyColumn = (facts: ExportFacts, names: string[]) => findColumn(facts.sampled ? facts.columns.filter((c) => c.seen) : facts.columns, names);

/** " (npi, mrn: empty in every sampled row)" for the candidate columns skipped as empty, for a TODO's text. */
function emptyCandidates(facts: ExportFacts, names: string[]): string {
  const empty = facts.sampled ? facts.columns.filter((c) => !c.seen && names.includes(normalizeColumn(c.name))).map((c) => c.name) : [];
  return empty.length ? ` (${empty.join(', ')}: empty in every sampled row)` : '';
}

function roleOf(col: ColumnFacts): Role | undefined {
  const n = normalizeColumn(col.name);
  for (const [role, names] of Object.entries(ROLE_NAMES) as [Role, string[]][]) if (names.includes(n)) return role;
  return undefined;
}

// ------------------------------------------------------------------------------------------ type guess

interface Guess {
  type?: WritableType;
  reason: string;
}

export function guessType(file: string, cols: ColumnFacts[]): Guess {
  const base = basename(file, extname(file)).toLowerCase();
  const patientCol = findColumn(cols, ['mrn', 'medicalrecordnumber', 'patientmrn']);
  const npiCol = findColumn(cols, ['npi', 'providernpi', 'practitionernpi']);
  if (/care.?team|assignment|caseload|encounter|visit|appointment|episode|referral/.test(base))
    return { type: 'CareTeam', reason: `guessed from the file name \`${basename(file)}\`` };
  if (/patient|client/.test(base)) return { type: 'Patient', reason: `guessed from the file name \`${basename(file)}\`` };
  if (/practitioner|provider|clinician|staff|physician|doctor|therapist|employee|user/.test(base))
    return { type: 'Practitioner', reason: `guessed from the file name \`${basename(file)}\`` };
  if (patientCol && npiCol) return { type: 'CareTeam', reason: `guessed from the columns ${patientCol.name} and ${npiCol.name}` };
  if (patientCol) return { type: 'Patient', reason: `guessed from the column ${patientCol.name}` };
  if (npiCol) return { type: 'Practitioner', reason: `guessed from the column ${npiCol.name}` };
  return { reason: 'no obvious type: neither the file name nor the columns (MRN, NPI) tell' };
}

// ------------------------------------------------------------------------------------------ generation

interface Ctx {
  genderLookup: boolean;
  patientName?: string;
  practitionerName?: string;
}

const FHIR_GENDERS = ['male', 'female', 'other', 'unknown'];

function genderCodeLabel(code: string): string | undefined {
  const c = code.toLowerCase();
  if (c === 'm' || c === 'male') return 'male';
  if (c === 'f' || c === 'female') return 'female';
  if (c === 'u' || c === 'unk' || c === 'unknown') return 'unknown';
  if (c === 'o' || c === 'other') return 'other';
  return undefined;
}

function needsGenderLookup(col: ColumnFacts): boolean {
  return !(col.codes && col.codes.length > 0 && col.codes.every((c) => FHIR_GENDERS.includes(c)));
}

function dateCall(fn: '$date' | '$dateTime', col: ColumnFacts): string {
  return `${fn}(${field(col.name)}, ${col.dateFormat ? JSON.stringify(col.dateFormat) : todo(dateQuestion(col))})`;
}

function dateQuestion(col: ColumnFacts): string {
  if (!col.dateAmbiguous) return `the date format of ${col.name}, e.g. MM/DD/YYYY`;
  const [dayFirst, monthFirst] = col.dateAmbiguous;
  return `the date format of ${col.name}: ${dayFirst} or ${monthFirst}? No sampled day is above 12, so its values read both ways`;
}

/** A column of dates its name does not announce (GEBDAT), proposed as the birth date when no column is named so. */
function valueDateColumn(cols: ColumnFacts[], used: Set<string>): ColumnFacts | undefined {
  const c = cols.find((col) => col.datesFromValues && !used.has(col.name) && !roleOf(col));
  if (c) used.add(c.name);
  return c;
}

function activeExpr(col: ColumnFacts): string {
  if (col.booleans === 'json') return field(col.name);
  if (col.booleans) return `${field(col.name)} = ${JSON.stringify(col.booleans.true)}`;
  return `${field(col.name)} = ${todo(`the value of ${col.name} that means active, e.g. "Y"`)}`;
}

/** Commented field lines (`/* "name": …, *\/`) for the columns with an obvious use; returns the columns used. */
function personLines(cols: ColumnFacts[], type: 'Patient' | 'Practitioner', used: Set<string>): { lines: string[]; extension: string[] } {
  const by = new Map<Role, ColumnFacts>();
  for (const c of cols) {
    if (used.has(c.name)) continue;
    const r = roleOf(c);
    if (r && !by.has(r)) by.set(r, c);
  }
  const take = (r: Role) => {
    const c = by.get(r);
    if (c) used.add(c.name);
    return c;
  };
  const lines: string[] = [];
  const extension: string[] = [];

  const first = take('first');
  const middle = take('middle');
  const last = take('last');
  const prefix = take('prefix');
  const full = first || last ? undefined : take('fullname');
  if (first || last || middle) {
    const given = [first, middle].filter(Boolean).map((c) => `$name(${field(c!.name)})`);
    const parts = [
      type === 'Patient' ? '"use": "official"' : undefined,
      last ? `"family": $name(${field(last.name)})` : undefined,
      given.length ? `"given": [${given.join(', ')}]` : undefined,
      prefix ? `"prefix": [${field(prefix.name)}]` : undefined,
    ].filter(Boolean);
    lines.push(`"name": [{ ${parts.join(', ')} }],`);
  } else if (full?.structured) {
    lines.push(`"name": ${todo(`${full.name} holds objects or arrays, not text: map its parts, e.g. ${full.name}.{ "family": …, "given": [ … ] }`)},`);
  } else if (full) {
    lines.push(`"name": [${fullNameExpr(full, prefix)}],`);
  } else if (prefix) {
    lines.push(`"name": [{ "prefix": [${field(prefix.name)}] }],`);
  }

  const sex = take('sex');
  if (sex) lines.push(`"gender": ${needsGenderLookup(sex) ? `$lookup($gender, ${field(sex.name)})` : field(sex.name)},`);
  const dob = take('dob') ?? valueDateColumn(cols, used);
  if (dob?.datesFromValues && roleOf(dob) !== 'dob') lines.push(`${dob.name} holds a date in every sampled row (its name does not say which): the birth date?`);
  if (dob) lines.push(`"birthDate": ${dateCall('$date', dob)},`);

  const use = type === 'Patient' ? 'home' : 'work';
  const telecom: string[] = [];
  const phone = take('phone');
  const mobile = take('mobile');
  const work = take('workphone');
  const fax = take('fax');
  const email = take('email');
  if (phone) telecom.push(`${field(phone.name)} ? { "system": "phone", "value": $phone(${field(phone.name)}), "use": "${use}" }`);
  if (mobile) telecom.push(`${field(mobile.name)} ? { "system": "phone", "value": $phone(${field(mobile.name)}), "use": "mobile" }`);
  if (work) telecom.push(`${field(work.name)} ? { "system": "phone", "value": $phone(${field(work.name)}), "use": "work" }`);
  if (fax) telecom.push(`${field(fax.name)} ? { "system": "fax", "value": $phone(${field(fax.name)}), "use": "${use}" }`);
  if (email)
    telecom.push(`${field(email.name)} ? { "system": "email", "value": $clean(${field(email.name)})${type === 'Practitioner' ? ', "use": "work"' : ''} }`);
  if (telecom.length) lines.push(`"telecom": [${telecom.join(', ')}],`);

  const a1 = take('addr1');
  const a2 = take('addr2');
  const city = take('city');
  const state = take('state');
  const zip = take('zip');
  const country = take('country');
  if (type === 'Patient' && (a1 || city || zip)) {
    const guard = field((a1 ?? city ?? zip)!.name);
    const parts = [
      '"use": "home"',
      a1 || a2
        ? `"line": [${[a1, a2]
            .filter(Boolean)
            .map((c) => field(c!.name))
            .join(', ')}]`
        : undefined,
      city ? `"city": ${field(city.name)}` : undefined,
      state ? `"state": ${field(state.name)}` : undefined,
      zip ? `"postalCode": ${field(zip.name)}` : undefined,
      country ? `"country": ${field(country.name)}` : undefined,
    ].filter(Boolean);
    lines.push(`"address": ${guard} ? [{ ${parts.join(', ')} }],`);
  } else {
    // Practitioners have no address in this API: leave those columns to the "not mapped" list.
    for (const c of [a1, a2, city, state, zip, country]) if (c) used.delete(c.name);
  }

  const active = take('active');
  if (active) lines.push(`"active": ${activeExpr(active)},`);

  if (type === 'Practitioner') {
    const role = take('role');
    if (role) extension.push(`{ "url": ${todo("your platform's staff roles URL")}, "valueString": ${field(role.name)} }`);
    const qual = take('qualification');
    if (qual) lines.push(`"qualification": [{ "code": { "text": ${field(qual.name)} } }],`);
  }
  return { lines, extension };
}

/**
 * The HumanName of a full-name column, split as its sampled values are written: "DOE, John" (family, comma,
 * given names) on the comma, "John Doe" on the first space, both forms seen: on the comma when there is one.
 */
function fullNameExpr(full: ColumnFacts, prefix: ColumnFacts | undefined): string {
  const f = field(full.name);
  const rest = prefix ? `, "prefix": [${field(prefix.name)}]` : '';
  const commaForm = `{ "family": $name($substringBefore(${f}, ",")), "given": $splitList($name($substringAfter(${f}, ",")), " ")${rest} }`;
  const spaceForm = `{ "family": $name($substringAfter(${f}, " ")), "given": [$name($substringBefore(${f}, " "))]${rest} }`;
  if (full.commaNames === 'all') return commaForm;
  if (full.commaNames === 'some') return `$contains(${f}, ",") ? ${commaForm} : ${spaceForm}`;
  return spaceForm;
}

function commentLine(s: string): string {
  return `/* ${s} */`;
}

function notMappedLine(cols: ColumnFacts[], why: string): string[] {
  return cols.length ? [commentLine(`${why}: ${cols.map(withDates).join(', ')}`)] : [];
}

/** A column's name, with the `$date` call for it when its sampled values are dates (`GEBDAT ($date(GEBDAT, "DD.MM.YYYY"))`). */
function withDates(c: ColumnFacts): string {
  if (c.dateAmbiguous) return `${c.name} (dates: ${c.dateAmbiguous.join(' or ')}?)`;
  return c.dateFormat ? `${c.name} (${dateCall('$date', c)})` : c.name;
}

interface Block {
  resource: StarterResource;
  yaml: string[];
}

function resourceBlock(facts: ExportFacts, source: string, name: string, guess: Guess, ctx: Ctx, fileShown: string): Block {
  const cols = facts.columns;
  const resource: StarterResource = { file: fileShown, source, name, type: guess.type, reason: guess.reason };
  const y: string[] = [];
  const used = new Set<string>();
  const body: string[] = [];
  const anchor: string[] = [];
  y.push(`  # ${fileShown} → ${guess.type ?? '?'}: ${guess.reason}${guess.type ? ' — check it' : ''}.`);
  y.push(`  - name: ${name}`);
  y.push(`    type: ${guess.type ?? yamlScalar(todo('Patient, Practitioner or CareTeam'))}`);
  y.push(`    from: ${source}`);

  const parts: BlockParts = { resource, y, used, body, anchor };
  if (guess.type === 'Patient' || guess.type === 'Practitioner') personBlock(facts, guess.type, ctx, parts);
  else if (guess.type === 'CareTeam') careTeamBlock(facts, ctx, parts);
  else {
    y.push(`    key: ${yamlScalar(todo('the column that identifies a record'))}`);
    body.push(...notMappedLine(cols, 'columns (choose the type, then map them)'));
  }

  y.push('    map: |');
  const inner = [...body, ...anchor.map((a, i) => (i < anchor.length - 1 ? `${a},` : a))];
  y.push('      {');
  for (const l of inner.join('\n').split('\n')) y.push(`        ${l}`);
  y.push('      }');
  return { resource, yaml: y };
}

/** What a resource block is built into: the YAML lines, the columns used, the map's commented and live lines. */
interface BlockParts {
  resource: StarterResource;
  y: string[];
  used: Set<string>;
  body: string[];
  anchor: string[];
}

function personBlock(facts: ExportFacts, type: 'Patient' | 'Practitioner', ctx: Ctx, { resource, y, used, body, anchor }: BlockParts): void {
  const cols = facts.columns;
  const keyNames = type === 'Patient' ? PATIENT_KEYS : PRACTITIONER_KEYS;
  const keyCol = findKeyColumn(facts, keyNames);
  if (keyCol) {
    used.add(keyCol.name);
    resource.key = keyCol.name;
    y.push(
      `    key: ${yamlScalar(field(keyCol.name))}${normalizeColumn(keyCol.name) === 'id' ? '    # check: the column that identifies a record across exports' : ''}`,
    );
  } else {
    y.push(`    key: ${yamlScalar(todo(`the column that identifies a record, e.g. MRN${emptyCandidates(facts, keyNames)}`))}`);
  }
  const isNpi = keyCol && normalizeColumn(keyCol.name).endsWith('npi');
  let system: string;
  if (isNpi) system = JSON.stringify(NPI_SYSTEM);
  else {
    system = todo(
      type === 'Patient' ? 'the namespace (URI) of your MRNs, e.g. urn:your-clinic:mrn' : 'the namespace (URI) of your staff ids, e.g. urn:your-clinic:staff',
    );
  }
  const value = keyCol ? field(keyCol.name) : todo('the key column');
  anchor.push(`"identifier": [{ "system": ${system}, "value": ${value} }]`);
  const { lines, extension } = personLines(cols, type, used);
  if (lines.some((l) => l.includes('$lookup($gender'))) ctx.genderLookup = true;
  body.push(...lines.map(commentLine));
  // Columns without an obvious field: listed, and the first one shown as a string extension (the only
  // free-form field of this API) — one line per column would not stay valid JSONata when uncommented.
  const rest = cols.filter((c) => !used.has(c.name));
  body.push(...notMappedLine(rest, `not mapped yet (no obvious ${type} field)`));
  const ext = [...extension, ...rest.slice(0, 1).map((c) => `{ "url": ${todo(`a URL naming ${c.name}`)}, "valueString": $string(${field(c.name)}) }`)];
  if (ext.length) body.push(commentLine(`"extension": [${ext.join(', ')}],`));
}

function careTeamBlock(facts: ExportFacts, ctx: Ctx, { resource, y, used, body, anchor }: BlockParts): void {
  const cols = facts.columns;
  const patientCol = findKeyColumn(facts, CARETEAM_PATIENT);
  const memberCol = findKeyColumn(facts, CARETEAM_MEMBER);
  if (patientCol) {
    used.add(patientCol.name);
    resource.groupBy = patientCol.name;
    y.push(`    groupBy: ${yamlScalar(field(patientCol.name))}    # every row of a patient → one care team`);
  } else {
    y.push(
      `    groupBy: ${yamlScalar(todo(`the column naming the patient, e.g. MRN${emptyCandidates(facts, CARETEAM_PATIENT)}`))}   # every row of a patient → one care team`,
    );
  }
  const pat = patientCol ? `$[0].${field(patientCol.name)}` : undefined;
  if (pat && ctx.patientName) y.push('    match: subject.reference     # one care team per patient: how to find it again on the server');
  anchor.push('"status": "active"');
  if (pat) body.push(commentLine(`"name": "Care team of patient " & ${pat},`));
  if (pat && ctx.patientName) anchor.push(`"subject": { "reference": $ref(${JSON.stringify(ctx.patientName)}, ${pat}) }`);
  else body.push(commentLine(`"subject": { "reference": $ref("patient", ${pat ?? todo('the patient column')}) },`));

  const start = cols.find((c) => roleOf(c) === 'start');
  const end = cols.find((c) => roleOf(c) === 'end');
  const role = cols.find((c) => roleOf(c) === 'role');
  for (const c of [memberCol, start, end, role]) if (c) used.add(c.name);
  const pLines: string[] = [];
  if (role) pLines.push(commentLine(`"role": [{ "coding": [{ "system": ${todo("your platform's staff roles URL")}, "display": ${field(role.name)} }] }],`));
  if (start || end) {
    const parts = [start ? `"start": ${dateCall('$dateTime', start)}` : undefined, end ? `"end": ${dateCall('$dateTime', end)}` : undefined].filter(Boolean);
    pLines.push(commentLine(`"period": { ${parts.join(', ')} },`));
  }
  const rest = cols.filter((c) => !used.has(c.name));
  pLines.push(...notMappedLine(rest, 'not mapped (no CareTeam field; see docs/mapping-functions.md)'));
  if (memberCol && ctx.practitionerName) {
    anchor.push(
      [
        '"participant": [$.{',
        ...pLines.map((l) => `  ${l}`),
        `  "member": { "reference": $ref(${JSON.stringify(ctx.practitionerName)}, ${field(memberCol.name)}) }`,
        '}]',
      ].join('\n'),
    );
  } else {
    body.push(
      commentLine(
        `"participant": [$.{ "member": { "reference": $ref("practitioner", ${memberCol ? field(memberCol.name) : todo('the practitioner column, e.g. NPI')}) } }],`,
      ),
    );
    body.push(...pLines);
  }
}

function sourceName(file: string, taken: Set<string>): string {
  let base = basename(file, extname(file))
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, '_')
    .replace(/^[^a-z]+/, '')
    .replace(/_+$/, '');
  if (!base) base = 'source';
  let name = base;
  for (let i = 2; taken.has(name); i++) name = `${base}-${i}`;
  taken.add(name);
  return name;
}

/** One mapping to write (or, with `note`, a part of a FHIR export that is not one). */
interface Plan {
  shown: string;
  rel: string;
  facts: ExportFacts;
  source: string;
  /** JSON: `records` of the source (`null`: not found, a TODO). */
  records?: string | null;
  type?: WritableType;
  reason: string;
  /** A CSV/JSON export of columns. */
  guess?: Guess;
  /** A FHIR export: the resource type read. */
  fhir?: FhirPart;
  /** An OMOP CDM table, recognised by its columns. */
  omop?: OmopTable;
  note?: string;
}

function planExports(exports: { facts: ExportFacts; shown: string; rel: string }[]): Plan[] {
  const taken = new Set<string>();
  const inputTypes = new Set(exports.flatMap((e) => Object.keys(e.facts.fhir?.types ?? {})));
  const omopTables = new Set(exports.flatMap((e) => (e.facts.fhir ? [] : [omopTableOf(e.facts.columns)].filter((t) => t !== undefined))));
  const plans: Plan[] = [];
  for (const e of exports) {
    const table = e.facts.fhir ? undefined : omopTableOf(e.facts.columns);
    if (table) {
      const t = omopPlanOf(table, omopTables);
      const common = { ...e, source: sourceName(e.facts.path, taken), records: e.facts.records, omop: table };
      plans.push('type' in t ? { ...common, type: t.type, reason: t.reason } : { ...common, reason: t.note, note: t.note });
      continue;
    }
    if (!e.facts.fhir) {
      const guess = guessType(e.facts.path, e.facts.columns);
      plans.push({ ...e, source: sourceName(e.facts.path, taken), records: e.facts.records, type: guess.type, reason: guess.reason, guess });
      continue;
    }
    for (const part of fhirParts(e.facts, taken)) {
      const t = apiTypeOf(part.fhirType, inputTypes);
      const common = { ...e, source: part.source, records: part.records ?? e.facts.records, fhir: part };
      plans.push('type' in t ? { ...common, type: t.type, reason: t.reason } : { ...common, reason: t.note, note: t.note });
    }
  }
  return plans;
}

/** Comment naming the earlier mapping of the same type, so that two are never proposed silently. */
function duplicateNote(type: string, first: { name: string; shown: string }): string[] {
  const text = `Another ${type} mapping — the first is \`${first.name}\` (from ${first.shown}). Each loads the records of its own export: one present in both is loaded twice. Keep one, or make sure the exports do not overlap; \`$ref\` in the other mappings points at \`${first.name}\` only.`;
  return wrap(text, 106).map((l) => `  # ${l}`);
}

/** Mapping names: the type in lower case when it is the only mapping of its type, else from the source. */
function nameMappings(mappings: Plan[]): { nameOf: Map<Plan, string>; counts: Map<string, number> } {
  const names = new Set<string>();
  const counts = new Map<string, number>();
  for (const p of mappings) if (p.type) counts.set(p.type, (counts.get(p.type) ?? 0) + 1);
  const nameOf = new Map<Plan, string>();
  for (const p of mappings) {
    const preferred = p.type && counts.get(p.type) === 1 ? p.type.toLowerCase() : p.fhir?.guard ? `${p.source}_${p.fhir.fhirType.toLowerCase()}` : p.source;
    let n = preferred;
    for (let i = 2; names.has(n); i++) n = `${preferred}-${i}`;
    names.add(n);
    nameOf.set(p, n);
  }
  return { nameOf, counts };
}

function headerLines(exports: { shown: string }[], outDir: string, readyMade: string[] | undefined, fhirTypes: string[], omop?: string[]): string[] {
  return [
    `# yaml-language-server: $schema=./${SCHEMA_COPY}`,
    '#',
    `# Starter mapping written by \`care-etl init\` from: ${exports.map((e) => e.shown).join(', ')}`,
    ...(readyMade ? fhirHeader(fhirTypes, relativeFrom(outDir, readyMade[0]!), relativeFrom(outDir, readyMade[1]!)) : []),
    ...(omop ?? []),
    '# Next steps (docs/mappings.md, "Writing a mapping"):',
    '#   1. Resolve every `$TODO("…")`. `care-etl validate <this file>` lists each one with its text, line and column.',
    '#   2. In each `map`, uncomment the fields you need (remove `/*` and `*/`) and adapt them: the functions',
    '#      ($date, $name, $phone, $lookup, $ref …) are described in docs/mapping-functions.md.',
    '#   3. Write test cases beside this file (<name>.test.yaml) and run `care-etl test`,',
    '#      then `care-etl run --dry-run <this file>`, then `care-etl run <this file>`.',
    '#',
    '# Where to load: command-line flags and the CARE_* environment variables override `target:`.',
    '# Without any target, `care-etl run` loads into an embedded sandbox kept in .care-etl/ beside this file.',
    '# target:',
    '#   baseUrl: ${CARE_BASE_URL}',
    '#   apiKey: ${CARE_API_KEY}',
    '#   emrId: ${CARE_EMR_ID}',
    '#   tenantId: ${CARE_TENANT_ID}',
    'version: 1',
  ];
}

/** One line per source; a source no mapping reads (e.g. PractitionerRole) is left commented. */
function sourceLines(plans: Plan[], mappings: Plan[]): string[] {
  const sources = [...new Map(plans.map((p) => [p.source, p])).values()];
  const width = Math.max(...sources.map((p) => p.source.length)) + 1;
  return sources.flatMap((p) => {
    const parts = [`path: ${yamlScalar(p.rel)}`];
    const csv = [
      ...(p.facts.delimiter ? [`delimiter: ${JSON.stringify(p.facts.delimiter)}`] : []),
      ...(p.facts.notUtf8 ? [`encoding: ${encodingValue(p.facts.notUtf8)}`] : []),
    ];
    if (csv.length) parts.push(`csv: { ${csv.join(', ')} }`);
    if (p.records === null) parts.push(`records: ${yamlScalar(todo('the path of the array of records in this JSON document, e.g. data.patients'))}`);
    else if (p.records) parts.push(`records: ${yamlScalar(p.records)}`);
    const optional = fhirOptionalElements(mappings.filter((q) => q.source === p.source && q.fhir).map((q) => q.fhir!.fhirType));
    if (optional.length) parts.push(`optional: [${optional.join(', ')}]`);
    const used = mappings.some((q) => q.source === p.source);
    const why = p.facts.notUtf8 ? encodingComment(p.shown, p.facts.notUtf8) : [];
    return [...why, `  ${used ? '' : '# '}${`${p.source}:`.padEnd(width + 1)} { ${parts.join(', ')} }${used ? '' : '   # not a mapping: see resources'}`];
  });
}

const encodingValue = (n: NotUtf8) =>
  n.proposed ?? yamlScalar(todo('the encoding of this export, e.g. iso-8859-15 (docs/mappings.md lists those care-etl reads)'));

/** Why `csv.encoding` is there: the byte that is not UTF-8 (its value, never the text around it) and what was chosen. */
function encodingComment(shown: string, n: NotUtf8): string[] {
  const byte = `0x${n.byte.toString(16).toUpperCase().padStart(2, '0')}`;
  const text = n.proposed
    ? `${shown} is not UTF-8 (byte ${byte} on line ${n.line}): read as ${n.proposed}, Latin-1 as Windows writes it (ISO-8859-1 text reads the same). If accented letters come out wrong, name its code page (docs/mappings.md).`
    : `${shown} is not UTF-8 (byte ${byte} on line ${n.line}) nor Windows-1252 (it holds a byte that code page does not define): name its encoding (docs/mappings.md).`;
  return wrap(text, 106).map((l) => `  # ${l}`);
}

/** The gender code table for the sex codes seen; a code without an obvious label is a marker. */
function genderLookupLines(plans: Plan[]): string[] {
  const codes = new Set<string>();
  for (const p of plans) for (const c of p.facts.columns) if (isSexColumn(c.name)) for (const code of c.codes ?? []) codes.add(code);
  const known = [...codes].filter((c) => genderCodeLabel(c));
  const unknown = [...codes].filter((c) => !genderCodeLabel(c));
  const table = known.length ? known.map((c) => `${JSON.stringify(c)}: ${genderCodeLabel(c)}`) : ['"M": male', '"F": female', '"U": unknown'];
  for (const c of unknown) table.push(`${JSON.stringify(c)}: ${yamlScalar(todo(`the FHIR gender of the code ${c}: male, female, other or unknown`))}`);
  return ['  # sex/gender codes of the exports → FHIR administrative gender (male, female, other, unknown)', `  gender: { ${table.join(', ')} }`];
}

export async function generateStarterMapping(opts: StarterOptions): Promise<StarterResult> {
  const cwd = opts.cwd ?? process.cwd();
  const out = resolve(cwd, opts.out ?? 'mapping.yaml');
  const outDir = dirname(out);
  if (!opts.from.length) throw new CareEtlError('give at least one export file with --from', { exitCode: ExitCode.config });

  const exports: { facts: ExportFacts; shown: string; rel: string }[] = [];
  for (const f of opts.from) {
    const abs = resolve(cwd, f);
    exports.push({ facts: await inspectExport(abs, f), shown: f, rel: relativeFrom(outDir, abs) });
  }

  const plans = planExports(exports);
  const mappings = plans.filter((p) => p.note === undefined);
  const { nameOf, counts } = nameMappings(mappings);
  const firstOf = (type: WritableType) => mappings.find((p) => p.type === type);
  const ctx: Ctx = {
    genderLookup: false,
    patientName: counts.get('Patient') === 1 ? nameOf.get(firstOf('Patient')!) : undefined,
    practitionerName: counts.get('Practitioner') === 1 ? nameOf.get(firstOf('Practitioner')!) : undefined,
  };
  const fhirFacts = exports.flatMap((e) => (e.facts.fhir ? [e.facts.fhir] : []));
  const fhirCtx: FhirCtx = {
    patientName: firstOf('Patient') && nameOf.get(firstOf('Patient')!),
    practitionerName: firstOf('Practitioner') && nameOf.get(firstOf('Practitioner')!),
    keying: { Patient: keyingOf('Patient', fhirFacts), Practitioner: keyingOf('Practitioner', fhirFacts) },
    roleFiles: plans.filter((p) => p.fhir?.fhirType === 'PractitionerRole').map((p) => p.shown),
  };
  const readyMade = fhirFacts.length ? ['fhir-r4-bulk', 'synthea-fhir'].map((m) => `${MAPPINGS_DIR}${m}/mapping.yaml`) : undefined;
  const omopTables = plans.flatMap((p) => (p.omop ? [p.omop] : []));
  const omopCtx: OmopCtx = {
    patientName: fhirCtx.patientName,
    practitionerName: fhirCtx.practitionerName,
    detailLookup: omopTables.includes('visit_occurrence') && omopTables.includes('visit_detail'),
    used: new Set(),
  };
  const fhirTypes = [...new Set(fhirFacts.flatMap((f) => Object.keys(f.types)))];

  const blocks: Block[] = [];
  const body: string[][] = [];
  const notes: StarterNote[] = [];
  for (const p of plans) {
    if (p.note !== undefined) {
      notes.push({ file: p.shown, resourceType: p.fhir?.fhirType ?? p.omop!, note: p.note });
      body.push(p.fhir ? fhirHeadline(p.shown, p.fhir, `${p.fhir.fhirType}: ${p.note}`) : omopHeadline(p.shown, `${p.omop!}: ${p.note}`));
      continue;
    }
    const name = nameOf.get(p)!;
    const first = p.type && firstOf(p.type);
    const dup = !first || first === p ? [] : duplicateNote(p.type!, { name: nameOf.get(first)!, shown: first.shown });
    const block = p.fhir ? fhirBlock(p, name, fhirCtx) : p.omop ? omopBlock(p, name, omopCtx) : resourceBlock(p.facts, p.source, name, p.guess!, ctx, p.shown);
    blocks.push(block);
    body.push([...dup, ...block.yaml]);
  }

  const omopReadyMade = omopTables.length ? relativeFrom(outDir, `${MAPPINGS_DIR}omop-cdm/mapping.yaml`) : undefined;
  const y = [
    ...headerLines(exports, outDir, readyMade, fhirTypes, omopReadyMade ? omopHeader(omopTables, omopReadyMade) : undefined),
    '',
    'sources:',
    ...sourceLines(plans, mappings),
  ];
  const omopLookups = omopLookupLines(
    omopCtx,
    plans.map((p) => ({ facts: p.facts, table: p.omop, rel: p.rel })),
  );
  const lookups = [...(ctx.genderLookup ? genderLookupLines(plans) : []), ...omopLookups];
  if (lookups.length) y.push('', 'lookups:', ...lookups);
  y.push('', 'resources:');
  body.forEach((lines, i) => {
    if (i) y.push('');
    y.push(...lines);
  });
  y.push('');
  const text = y.join('\n');
  return {
    out,
    text,
    resources: blocks.map((b) => b.resource),
    notes,
    ...(readyMade ? { readyMade } : {}),
    ...(omopTables.length ? { omopTables } : {}),
    todos: findTodoMarkers(text, out).length,
  };
}

function omopHeadline(shown: string, what: string): string[] {
  return wrap(`${shown} → ${what}.`, 106).map((l) => `  # ${l}`);
}

/** The starter's record of a planned resource, with the key / groupBy column its generated map uses. */
function plannedResource(p: Plan, name: string, made: { key?: string; groupBy?: string }): StarterResource {
  return {
    file: p.shown,
    source: p.source,
    name,
    type: p.type,
    reason: p.reason,
    ...(made.key ? { key: made.key } : {}),
    ...(made.groupBy ? { groupBy: made.groupBy } : {}),
  };
}

function omopBlock(p: Plan, name: string, ctx: OmopCtx): Block {
  const o = omopMappingYaml(p.omop!, p.type!, p.facts, p.source, ctx);
  const resource = plannedResource(p, name, o);
  return { resource, yaml: [...omopHeadline(p.shown, `${p.type}: ${p.reason}`), `  - name: ${name}`, ...o.yaml] };
}

function fhirBlock(p: Plan, name: string, ctx: FhirCtx): Block {
  const f = fhirMappingYaml(p.fhir!, p.type!, p.facts, ctx);
  const resource = plannedResource(p, name, f);
  return { resource, yaml: [...fhirHeadline(p.shown, p.fhir!, `${p.type}: ${p.reason}`), `  - name: ${name}`, ...f.yaml] };
}

/** Generates and writes the starter mapping; never overwrites an existing file unless `force`. */
export async function writeStarterMapping(opts: StarterOptions & { force?: boolean }): Promise<StarterResult> {
  const result = await generateStarterMapping(opts);
  try {
    await writeFile(result.out, result.text, { flag: opts.force ? 'w' : 'wx' });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const shown = relativeFrom(opts.cwd ?? process.cwd(), result.out);
    if (code === 'EEXIST') {
      throw new CareEtlError(`${shown} already exists: not overwritten`, {
        issues: [issue.error('file-exists', `${shown} already exists`, { location: { file: shown } })],
        exitCode: ExitCode.config,
        hint: 'Choose another file with --out, or replace it with --force.',
      });
    }
    throw new CareEtlError(`cannot write ${shown}${code ? ` (${code})` : ''}`, { exitCode: ExitCode.config, cause: err });
  }
  return { ...result, ...(await copySchemaBeside(result.out, opts.force)) };
}

/** Writes `SCHEMA_COPY` beside the mapping; one already there is kept unless `force` (it may be a newer version's). */
async function copySchemaBeside(mappingFile: string, force: boolean | undefined): Promise<{ schemaCopy?: string }> {
  const target = resolve(dirname(mappingFile), SCHEMA_COPY);
  if (target === MAPPING_SCHEMA_PATH) return {};
  try {
    await copyFile(MAPPING_SCHEMA_PATH, target, force ? 0 : constants.COPYFILE_EXCL);
    return { schemaCopy: target };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return {};
    throw new CareEtlError(`cannot write ${SCHEMA_COPY} beside ${basename(mappingFile)} (${(err as NodeJS.ErrnoException).code ?? 'error'})`, {
      exitCode: ExitCode.config,
      cause: err,
    });
  }
}
