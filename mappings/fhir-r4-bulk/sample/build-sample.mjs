// Rebuilds the NDJSON sample of mappings/fhir-r4-bulk from the official FHIR R4 examples (CC0):
//   npm install --no-save hl7.fhir.r4.examples@4.0.1   (not a devDependency: 191 MB, only needed here)
//   node mappings/fhir-r4-bulk/sample/build-sample.mjs
// Every Patient-*.json and Practitioner-*.json example and CareTeam-example.json are written one per line,
// unchanged (only re-serialised without whitespace), in file-name order; the care teams with ids
// `care-etl-*` below are our own (CC0 as well) and refer to example resources.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const pkgDir = dirname(createRequire(import.meta.url).resolve('hl7.fhir.r4.examples/package.json'));
const line = (file) => `${JSON.stringify(JSON.parse(readFileSync(join(pkgDir, file), 'utf8')))}\n`;
const files = (prefix) => readdirSync(pkgDir).filter((f) => f.startsWith(prefix) && f.endsWith('.json')).sort();

export const OWN_CARE_TEAMS = [
  {
    resourceType: 'CareTeam',
    id: 'care-etl-team-1',
    meta: { source: 'care-etl sample' },
    status: 'active',
    category: [{ coding: [{ system: 'http://loinc.org', code: 'LA27976-2', display: 'Encounter-focused care team' }] }],
    name: 'Behavioral health team of P. van de Heuvel',
    subject: { reference: 'Patient/f001', display: 'P. van de Heuvel' },
    period: { start: '2024-01-15' },
    participant: [
      { role: [{ coding: [{ system: 'http://snomed.info/sct', code: '59058001', display: 'General physician' }] }], member: { reference: 'Practitioner/f001' }, period: { start: '2024-01-15T09:00:00Z' } },
      { role: [{ text: 'psychologist' }], member: { reference: 'https://hl7.org/fhir/Practitioner/f002/_history/1' }, onBehalfOf: { reference: 'Organization/f001' } },
      { role: [{ text: 'mother' }], member: { reference: 'RelatedPerson/peter' } },
    ],
    managingOrganization: [{ reference: 'Organization/f001' }],
  },
  {
    resourceType: 'CareTeam',
    id: 'care-etl-team-2',
    status: 'inactive',
    subject: { reference: 'Patient/pat1' },
    period: { start: '2020-03-01', end: '2023-06-30T17:00:00+02:00' },
    participant: [{ member: { reference: 'Practitioner/example' }, period: { start: '2020-03-01', end: '2023-06-30' } }, { member: { reference: 'Practitioner/xcda1' } }],
    note: [{ text: 'Transferred to another clinic.' }],
  },
];

writeFileSync(join(here, 'Patient.ndjson'), files('Patient-').map(line).join(''));
writeFileSync(join(here, 'Practitioner.ndjson'), files('Practitioner-').map(line).join(''));
writeFileSync(join(here, 'CareTeam.ndjson'), line('CareTeam-example.json') + OWN_CARE_TEAMS.map((t) => `${JSON.stringify(t)}\n`).join(''));
console.log(`written to ${here}: ${files('Patient-').length} patients, ${files('Practitioner-').length} practitioners, ${1 + OWN_CARE_TEAMS.length} care teams`);
