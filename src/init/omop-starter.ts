/**
 * `care-etl init` on an OMOP CDM v5.4 export: the tables are recognised by their column names (not the file
 * names), and written as mappings/omop-cdm maps them — person → Patient (key person_id), provider →
 * Practitioner (key provider_id), visit_occurrence (or visit_detail) → one CareTeam per person whose members
 * are the distinct providers of the person's visits. What only the user knows (identifier systems, a gender
 * concept not in the standard table) is a `$TODO("…")` marker.
 */
import type { WritableType } from '../schemas/resource-types.js';
import type { ColumnFacts, ExportFacts } from './inspect-export.js';
import { field, todo, wrap, yamlScalar } from './yaml-text.js';

export type OmopTable = 'person' | 'provider' | 'visit_occurrence' | 'visit_detail' | 'care_site';

/**
 * Columns a table's CSV header must all have (case-insensitive) to be read as that CDM table: its NOT NULL
 * columns plus ones no other table has. Column order and the other columns do not matter (v5.3 matches too).
 */
export const OMOP_SIGNATURES: Record<OmopTable, string[]> = {
  person: ['person_id', 'gender_concept_id', 'year_of_birth', 'race_concept_id', 'ethnicity_concept_id'],
  provider: ['provider_id', 'provider_name', 'npi', 'specialty_concept_id'],
  visit_occurrence: ['visit_occurrence_id', 'person_id', 'visit_concept_id', 'visit_start_date', 'visit_type_concept_id'],
  visit_detail: ['visit_detail_id', 'person_id', 'visit_detail_concept_id', 'visit_detail_start_date', 'visit_occurrence_id'],
  care_site: ['care_site_id', 'care_site_name', 'place_of_service_concept_id'],
};

const NPI_SYSTEM = 'http://hl7.org/fhir/sid/us-npi';
/** OMOP Gender concepts → FHIR gender. 0 ("No matching concept") is not here: the source value is read instead. */
const GENDER_CONCEPTS: Record<string, string> = { '8507': 'male', '8532': 'female', '8521': 'other', '8570': 'other', '8551': 'unknown' };
const GENDER_SOURCE: Record<string, string> = { M: 'male', F: 'female', O: 'other', U: 'unknown' };

export function omopTableOf(cols: ColumnFacts[]): OmopTable | undefined {
  const names = new Set(cols.map((c) => c.name.toLowerCase()));
  return (Object.keys(OMOP_SIGNATURES) as OmopTable[]).find((t) => OMOP_SIGNATURES[t].every((c) => names.has(c)));
}

/** What a recognised table becomes: a resource type, or a note saying why it is not a mapping. */
export function omopPlanOf(table: OmopTable, tables: Set<OmopTable>): { type: WritableType; reason: string } | { note: string } {
  const why = `OMOP CDM \`${table}\` table (recognised by its columns ${OMOP_SIGNATURES[table].join(', ')})`;
  if (table === 'person') return { type: 'Patient', reason: why };
  if (table === 'provider') return { type: 'Practitioner', reason: why };
  if (table === 'visit_occurrence') return { type: 'CareTeam', reason: `${why}: one care team per person` };
  if (table === 'visit_detail') {
    if (tables.has('visit_occurrence'))
      return { note: 'not a mapping: read as the lookup `visitDetailProviders`, its providers join the care teams of visit_occurrence' };
    return { type: 'CareTeam', reason: `${why}: one care team per person` };
  }
  return { note: 'not a mapping: this API has no care site or organization resource' };
}

export interface OmopCtx {
  patientName?: string;
  practitionerName?: string;
  /** visit_detail is joined to the visit_occurrence care teams through the lookup `visitDetailProviders`. */
  detailLookup: boolean;
  /** The lookups the maps use (filled while the maps are written): `omopGender`, `omopGenderSource`. */
  used: Set<string>;
}

/** The actual header name of a CDM column (exports may upper-case them), when the file has it. */
function colOf(facts: ExportFacts, name: string): string | undefined {
  return facts.columns.find((c) => c.name.toLowerCase() === name)?.name;
}

/** A JSONata reference to a CDM column, as the header spells it. */
const ref = (facts: ExportFacts, name: string) => field(colOf(facts, name) ?? name);

function notMapped(facts: ExportFacts, used: string[], why: string): string[] {
  const rest = facts.columns.map((c) => c.name).filter((n) => !used.includes(n.toLowerCase()));
  return rest.length ? wrap(`not mapped (${why}): ${rest.join(', ')}`, 96).map((l) => `/* ${l} */`) : [];
}

function genderExpr(facts: ExportFacts, ctx: OmopCtx): string | undefined {
  const concept = colOf(facts, 'gender_concept_id');
  const source = colOf(facts, 'gender_source_value');
  if (source) ctx.used.add('omopGenderSource');
  const fromSource = source ? `$lookup($omopGenderSource, $uppercase(${field(source)}), ())` : '()';
  if (!concept) return source ? fromSource : undefined;
  ctx.used.add('omopGender');
  // $string: a JSON / NDJSON export has numbers where a CSV has text
  return `${field(concept)} and $string(${field(concept)}) != "0"\n? $lookup($omopGender, ${field(concept)})\n: ${fromSource}`;
}

/** birth_datetime when set, else year[-month[-day]] of birth: as precise as the row (a year is a FHIR date). */
function birthDateExpr(facts: ExportFacts): string | undefined {
  const year = colOf(facts, 'year_of_birth');
  if (!year) return undefined;
  const month = colOf(facts, 'month_of_birth');
  const day = colOf(facts, 'day_of_birth');
  const dt = colOf(facts, 'birth_datetime');
  const two = (c: string) => `$formatNumber($number(${field(c)}), "00")`;
  const parts = [
    `$string(${field(year)})`,
    month ? `${field(month)} ? ${two(month)}` : undefined,
    month && day ? `${field(month)} and ${field(day)} ? ${two(day)}` : undefined,
  ].filter(Boolean);
  const ymd = `$join([${parts.join(', ')}], "-")`;
  return dt ? `${field(dt)}\n? $substring(${field(dt)}, 0, 10)\n: ${ymd}` : ymd;
}

/** Indents a multi-line field value under its `"name":` line. */
const entry = (name: string, value: string) => `"${name}": ${value.split('\n').join('\n  ')}`;

/** The `key:` line: a key column empty in every sampled row is never chosen. */
function keyLine(facts: ExportFacts, name: string, comment: string): { key?: string; line: string } {
  const c = facts.columns.find((x) => x.name.toLowerCase() === name);
  if (c && (c.seen || !facts.sampled)) return { key: c.name, line: `    key: ${yamlScalar(field(c.name))}    # ${comment}` };
  return { line: `    key: ${yamlScalar(todo(`the column that identifies a record (${name} is ${c ? 'empty in every sampled row' : 'missing'})`))}` };
}

export interface OmopBlock {
  key?: string;
  groupBy?: string;
  /** Lines after `  - name: …` (type, from, key/groupBy, map). */
  yaml: string[];
}

export function omopMappingYaml(table: OmopTable, type: WritableType, facts: ExportFacts, source: string, ctx: OmopCtx): OmopBlock {
  const head = [`    type: ${type}`, `    from: ${source}`];
  if (table === 'person') return personYaml(facts, head, ctx);
  if (table === 'provider') return providerYaml(facts, head, ctx);
  return visitYaml(table, facts, head, ctx);
}

function mapLines(body: string[], block?: string[]): string[] {
  const obj = ['{', ...body.flatMap((l) => l.split('\n')).map((l) => `  ${l}`), '}'];
  const lines = block ? ['(', ...block.map((l) => `  ${l}`), ...obj.map((l) => `  ${l}`), ')'] : obj;
  return ['    map: |', ...lines.map((l) => `      ${l}`)];
}

/** Comma-separates the fields of an object, leaving comment lines alone. */
function fields(lines: string[]): string[] {
  const last = lines.map((l, i) => (l.startsWith('/*') ? -1 : i)).reduce((a, b) => Math.max(a, b), -1);
  return lines.map((l, i) => (l.startsWith('/*') || i === last ? l : `${l},`));
}

function personYaml(facts: ExportFacts, head: string[], ctx: OmopCtx): OmopBlock {
  const k = keyLine(facts, 'person_id', 'the id visit_occurrence and visit_detail refer to');
  const src = colOf(facts, 'person_source_value');
  const ids = [
    src
      ? `${field(src)} ? { "system": ${todo("the namespace (URI) of person_source_value, your source system's patient ids, e.g. urn:your-org:patient-id")}, "value": $string(${field(src)}) }`
      : undefined,
    `{ "system": ${todo('the namespace (URI) of the CDM person_id, e.g. urn:your-org:omop:person_id')}, "value": $string(${ref(facts, 'person_id')}) }`,
  ].filter(Boolean);
  const gender = genderExpr(facts, ctx);
  const birth = birthDateExpr(facts);
  const used = [
    'person_id',
    'person_source_value',
    'gender_concept_id',
    'gender_source_value',
    'year_of_birth',
    'month_of_birth',
    'day_of_birth',
    'birth_datetime',
  ];
  const body = fields([
    "/* The CDM has no names, addresses or contacts for persons. person_source_value (the source system's id, */",
    '/* stable across CDM rebuilds) comes first: it is what `match: identifier` compares. */',
    ...notMapped(facts, used, 'no Patient field'),
    `"identifier": [\n  ${ids.join(',\n  ')}\n]`,
    '"active": true',
    ...(gender ? [entry('gender', gender)] : []),
    ...(birth ? [entry('birthDate', birth)] : []),
  ]);
  return { key: k.key, yaml: [...head, k.line, ...mapLines(body)] };
}

function providerYaml(facts: ExportFacts, head: string[], ctx: OmopCtx): OmopBlock {
  const k = keyLine(facts, 'provider_id', 'the id visit_occurrence and visit_detail refer to');
  const npi = colOf(facts, 'npi');
  const src = colOf(facts, 'provider_source_value');
  const name = colOf(facts, 'provider_name');
  const specialty = colOf(facts, 'specialty_source_value');
  const ids = [
    npi ? `${field(npi)} ? { "system": ${JSON.stringify(NPI_SYSTEM)}, "value": $string(${field(npi)}) }` : undefined,
    src
      ? `${field(src)} ? { "system": ${todo("the namespace (URI) of provider_source_value, your source system's staff ids, e.g. urn:your-org:staff-id")}, "value": $string(${field(src)}) }`
      : undefined,
    `{ "system": ${todo('the namespace (URI) of the CDM provider_id, e.g. urn:your-org:omop:provider_id')}, "value": $string(${ref(facts, 'provider_id')}) }`,
  ].filter(Boolean);
  const gender = genderExpr(facts, ctx);
  // provider_name is one text: "Given Family" or "Family, Given".
  const block = name
    ? [
        `$comma := $contains(${field(name)}, ",");`,
        `$parts := $comma ? $split(${field(name)}, ",") ~> $map($trim) : $split($trim(${field(name)}), " ");`,
        '$n := $count($parts);',
      ]
    : undefined;
  const used = ['provider_id', 'npi', 'provider_source_value', 'provider_name', 'gender_concept_id', 'gender_source_value', 'specialty_source_value'];
  const body = fields([
    ...notMapped(facts, used, 'no Practitioner field'),
    `"identifier": [\n  ${ids.join(',\n  ')}\n]`,
    '"active": true',
    ...(name
      ? [
          `"name": ${field(name)} ? [$comma\n  ? { "family": $parts[0], "given": [$parts[1]] }\n  : { "family": $parts[$n - 1], "given": $n > 1 ? [$filter($parts, function($v, $i) { $i < $n - 1 })] }]`,
        ]
      : []),
    ...(gender ? [entry('gender', gender)] : []),
    ...(specialty
      ? [
          `/* "extension": ${field(specialty)} ? [{ "url": "<your platform's staff roles URL>", "valueString": ${field(specialty)} }], */`,
          `"qualification": ${field(specialty)} ? [{ "code": { "text": ${field(specialty)} } }]`,
        ]
      : []),
  ]);
  return { key: k.key, yaml: [...head, k.line, ...mapLines(body, block)] };
}

function visitYaml(table: OmopTable, facts: ExportFacts, head: string[], ctx: OmopCtx): OmopBlock {
  const person = colOf(facts, 'person_id')!;
  const provider = colOf(facts, 'provider_id');
  const start = colOf(facts, table === 'visit_detail' ? 'visit_detail_start_date' : 'visit_start_date')!;
  const patientRef = ctx.patientName ? JSON.stringify(ctx.patientName) : todo('the name of the Patient mapping keyed by person_id (no person table was given)');
  const practitionerRef = ctx.practitionerName
    ? JSON.stringify(ctx.practitionerName)
    : todo('the name of the Practitioner mapping keyed by provider_id (no provider table was given)');
  const fromVisits = provider ? `$[${field(provider)}].{ "provider": $string(${field(provider)}), "start": ${field(start)} }` : '[]';
  const block = [
    `$pid := $[0].${field(person)};`,
    '$first := function($dates) { $substring($sort($dates)[0], 0, 10) };',
    ctx.detailLookup && table === 'visit_occurrence'
      ? `$seen := $append(${fromVisits}, $lookup($visitDetailProviders, $pid, ()));   /* + the providers of visit_detail */`
      : `$seen := ${fromVisits};   /* visits without ${provider ?? 'provider_id'} add no one */`,
    '$byProvider := $seen{ provider: [start] };',
  ];
  const body = fields([
    ...notMapped(facts, ['person_id', 'provider_id', start.toLowerCase()], 'no CareTeam field'),
    '"status": "active"',
    '"name": "Care team of person " & $pid',
    `"subject": { "reference": $ref(${patientRef}, $pid) }`,
    `"period": { "start": $first($.${field(start)}) }`,
    [
      '"participant": [$each($byProvider, function($starts, $provider) {{',
      `  "member": { "reference": $ref(${practitionerRef}, $provider) },`,
      '  "period": { "start": $first($starts) }',
      '}})]',
    ].join('\n'),
  ]);
  return {
    groupBy: person,
    yaml: [
      ...head,
      `    groupBy: ${yamlScalar(field(person))}    # every visit of a person → one care team, its members the providers of the visits`,
      '    match: subject.reference',
      ...mapLines(body, block),
    ],
  };
}

/** The `lookups:` entries the OMOP maps use (under the one `lookups:` key of the file). */
export function omopLookupLines(ctx: OmopCtx, exports: { facts: ExportFacts; table?: OmopTable; rel: string }[]): string[] {
  const y: string[] = [];
  const codes = (name: string) => [
    ...new Set(
      exports
        .filter((e) => e.table === 'person' || e.table === 'provider')
        .flatMap((e) => e.facts.columns.filter((c) => c.name.toLowerCase() === name).flatMap((c) => c.codes ?? [])),
    ),
  ];
  if (ctx.used.has('omopGender')) {
    const table = Object.entries(GENDER_CONCEPTS).map(([c, g]) => `"${c}": ${g}`);
    for (const c of codes('gender_concept_id'))
      if (c !== '0' && !GENDER_CONCEPTS[c])
        table.push(`${JSON.stringify(c)}: ${yamlScalar(todo(`the FHIR gender of the OMOP gender concept ${c}: male, female, other or unknown`))}`);
    y.push('  # OMOP Gender concepts → FHIR gender; 0 ("No matching concept") reads gender_source_value instead', `  omopGender: { ${table.join(', ')} }`);
  }
  if (ctx.used.has('omopGenderSource')) {
    const table = Object.entries(GENDER_SOURCE).map(([c, g]) => `${c}: ${g}`);
    for (const c of codes('gender_source_value').map((v) => v.toUpperCase()))
      if (!GENDER_SOURCE[c])
        table.push(`${JSON.stringify(c)}: ${yamlScalar(todo(`the FHIR gender of the gender_source_value ${c}: male, female, other or unknown`))}`);
    y.push('  # gender_source_value codes (upper-cased) → FHIR gender', `  omopGenderSource: { ${[...new Set(table)].join(', ')} }`);
  }
  const detail = exports.find((e) => e.table === 'visit_detail');
  if (ctx.detailLookup && detail) {
    const f = detail.facts;
    const csv = f.delimiter ? `\n    csv: { delimiter: ${JSON.stringify(f.delimiter)} }` : '';
    y.push(
      "  # The providers of each person's visit_detail rows (ward / department stays), by person_id.",
      '  visitDetailProviders:',
      `    path: ${yamlScalar(detail.rel)}${csv}`,
      `    key: ${yamlScalar(field(colOf(f, 'person_id')!))}`,
      `    value: ${yamlScalar(`${ref(f, 'provider_id')} ? { "provider": $string(${ref(f, 'provider_id')}), "start": ${ref(f, 'visit_detail_start_date')} }`)}`,
      '    many: true',
    );
  }
  return y;
}

export function omopHeader(tables: OmopTable[], readyMade: string): string[] {
  return [
    `# OMOP CDM v5.4 tables recognised by their column names (not the file names): ${tables.join(', ')}.`,
    '# care-etl ships a ready-made mapping for them, with tests and a sample (mappings/README.md):',
    `#   ${readyMade}`,
    '# The maps below follow it: person → Patient, provider → Practitioner, visits → one CareTeam per person.',
    '#',
  ];
}
