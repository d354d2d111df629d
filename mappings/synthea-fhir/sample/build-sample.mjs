// Builds the FHIR R4 Bulk Data sample of mappings/synthea-fhir from the real Synthea 3.0.0 CSV sample in
// mappings/synthea/sample (Apache-2.0, see its SOURCE.md), in the shape Synthea's FHIR R4 exporter writes
// with bulk data on (`exporter.fhir.bulk_data = true`): one resource per line, references between files by
// conditional reference (`Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|<NPI>`), no CareTeam file.
//   node mappings/synthea-fhir/sample/build-sample.mjs
// Deterministic: same CSV in, same bytes out. What is real and what is generated: sample/SOURCE.md.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'csv-parse/sync';

const here = dirname(fileURLToPath(import.meta.url));
const csvDir = join(here, '..', '..', 'synthea', 'sample');
const read = (file) => parse(readFileSync(join(csvDir, file)), { columns: true, bom: true, skip_empty_lines: true });

const SYNTHEA = 'https://github.com/synthetichealth/synthea';
const NPI = 'http://hl7.org/fhir/sid/us-npi';
const V2_0203 = 'http://terminology.hl7.org/CodeSystem/v2-0203';
const US_CORE = 'http://hl7.org/fhir/us/core/StructureDefinition';
const NUCC = 'http://nucc.org/provider-taxonomy';

// Synthea 3.0.0's CSV has no NPI: a 10-digit one is derived from the provider's row in providers.csv
// (Synthea's own NPIs are 10 digits starting with 999 as well), stable for as long as that file is.
const npiOf = (row) => String(9999999999 - row);
// Synthea writes a generated `555-…` home phone that its 3.0.0 CSV does not carry: derived from the id.
const phoneOf = (id) => {
  const n = createHash('sha256').update(id).digest().readUInt32BE(0);
  return `555-${String(n % 900 + 100)}-${String(Math.floor(n / 900) % 10000).padStart(4, '0')}`;
};
const coding = (system, code, display) => ({ coding: [{ system, code, display }], text: display });
const idType = (code, display) => ({ coding: [{ system: V2_0203, code, display }], text: display });
const STATES = { Massachusetts: 'MA' };
const RACE = {
  white: ['2106-3', 'White'], black: ['2054-5', 'Black or African American'], asian: ['2028-9', 'Asian'],
  native: ['1002-5', 'American Indian or Alaska Native'], hawaiian: ['2076-8', 'Native Hawaiian or Other Pacific Islander'],
  other: ['2131-1', 'Other Race'],
};
const ETHNICITY = { hispanic: ['2135-2', 'Hispanic or Latino'], nonhispanic: ['2186-5', 'Not Hispanic or Latino'] };
const MARITAL = { M: 'Married', S: 'Never Married', D: 'Divorced', W: 'Widowed' };
const CLASS = { ambulatory: 'AMB', wellness: 'AMB', outpatient: 'AMB', urgentcare: 'AMB', emergency: 'EMER', inpatient: 'IMP' };
// The CSV's SPECIALITY as a NUCC provider taxonomy code (Synthea 3.0.0 writes 208D00000X for every role).
const SPECIALTY = {
  'AUDIOLOGIST': ['231H00000X', 'Audiologist'], 'CHIROPRACTIC': ['111N00000X', 'Chiropractor'],
  'CLINICAL PSYCHOLOGIST': ['103TC0700X', 'Clinical Psychologist'], 'CLINICAL SOCIAL WORKER': ['1041C0700X', 'Clinical Social Worker'],
  'EMERGENCY MEDICINE': ['207P00000X', 'Emergency Medicine'], 'FAMILY PRACTICE': ['207Q00000X', 'Family Medicine'],
  'GENERAL PRACTICE': ['208D00000X', 'General Practice'], 'INTERNAL MEDICINE': ['207R00000X', 'Internal Medicine'],
  'NURSE PRACTITIONER': ['363L00000X', 'Nurse Practitioner'], 'OPTOMETRY': ['152W00000X', 'Optometrist'],
  'PHYSICAL THERAPY': ['225100000X', 'Physical Therapist'], 'PHYSICIAN ASSISTANT': ['363A00000X', 'Physician Assistant'],
  'PSYCHIATRY': ['2084P0800X', 'Psychiatry'],
};
const drop = (o) => JSON.parse(JSON.stringify(o, (_k, v) => (v === '' || v === undefined ? undefined : v)));

const patients = read('patients.csv');
const providers = read('providers.csv');
// Each patient's latest ENCOUNTERS_PER_PATIENT encounters (in file order) keep the sample small.
const ENCOUNTERS_PER_PATIENT = 10;
const allEncounters = read('encounters.csv');
const latest = new Set(patients.flatMap((p) => allEncounters.filter((e) => e.PATIENT === p.Id)
  .sort((a, b) => b.START.localeCompare(a.START) || a.Id.localeCompare(b.Id)).slice(0, ENCOUNTERS_PER_PATIENT).map((e) => e.Id)));
const encounters = allEncounters.filter((e) => latest.has(e.Id));
const seen = new Set(encounters.map((e) => e.PROVIDER));
const providerRow = new Map(providers.map((p, i) => [p.Id, i]));
const practitionerRef = (id) => `Practitioner?identifier=${NPI}|${npiOf(providerRow.get(id))}`;
const providerById = new Map(providers.map((p) => [p.Id, p]));
const patientById = new Map(patients.map((p) => [p.Id, p]));
const fullName = (p) => [p.PREFIX, p.FIRST, p.LAST, p.SUFFIX].filter(Boolean).join(' ');
const drName = (p) => `Dr. ${p.NAME}`;
const splitName = (p) => { const [given, ...rest] = p.NAME.split(' '); return { given, family: rest.join(' ') }; };

const patient = (p) => {
  const [bpCity, bpState, bpCountry] = p.BIRTHPLACE.split(/\s{2,}/);
  const race = RACE[p.RACE] ?? RACE.other;
  const eth = ETHNICITY[p.ETHNICITY];
  const names = [{ use: 'official', family: p.LAST, given: [p.FIRST], prefix: p.PREFIX ? [p.PREFIX] : undefined, suffix: p.SUFFIX ? [p.SUFFIX] : undefined }];
  if (p.MAIDEN) names.push({ use: 'maiden', family: p.MAIDEN, given: [p.FIRST], prefix: p.PREFIX ? [p.PREFIX] : undefined });
  return drop({
    resourceType: 'Patient',
    id: p.Id,
    meta: { profile: [`${US_CORE}/us-core-patient`] },
    text: { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml">Generated by <a href="${SYNTHEA}">Synthea</a>.Version identifier: v3.0.0</div>` },
    extension: [
      { url: `${US_CORE}/us-core-race`, extension: [{ url: 'ombCategory', valueCoding: { system: 'urn:oid:2.16.840.1.113883.6.238', code: race[0], display: race[1] } }, { url: 'text', valueString: race[1] }] },
      eth && { url: `${US_CORE}/us-core-ethnicity`, extension: [{ url: 'ombCategory', valueCoding: { system: 'urn:oid:2.16.840.1.113883.6.238', code: eth[0], display: eth[1] } }, { url: 'text', valueString: eth[1] }] },
      { url: `${US_CORE}/us-core-birthsex`, valueCode: p.GENDER },
      { url: 'http://hl7.org/fhir/StructureDefinition/patient-birthPlace', valueAddress: { city: bpCity, state: bpState, country: bpCountry } },
    ].filter(Boolean),
    identifier: [
      { system: SYNTHEA, value: p.Id },
      { type: idType('MR', 'Medical Record Number'), system: 'http://hospital.smarthealthit.org', value: p.Id },
      { type: idType('SS', 'Social Security Number'), system: 'http://hl7.org/fhir/sid/us-ssn', value: p.SSN },
      p.DRIVERS && { type: idType('DL', "Driver's license number"), system: 'urn:oid:2.16.840.1.113883.4.3.25', value: p.DRIVERS },
      p.PASSPORT && { type: idType('PPN', 'Passport Number'), system: 'http://standardhealthrecord.org/fhir/StructureDefinition/passportNumber', value: p.PASSPORT },
    ].filter(Boolean),
    name: names,
    telecom: [{ system: 'phone', value: phoneOf(p.Id), use: 'home' }],
    gender: p.GENDER === 'M' ? 'male' : 'female',
    birthDate: p.BIRTHDATE,
    // the CSV has the day of death only: a date-only dateTime (valid FHIR), not an invented time of day
    deceasedDateTime: p.DEATHDATE || undefined,
    address: [{
      extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/geolocation', extension: [{ url: 'latitude', valueDecimal: Number(p.LAT) }, { url: 'longitude', valueDecimal: Number(p.LON) }] }],
      line: [p.ADDRESS], city: p.CITY, state: STATES[p.STATE] ?? p.STATE, postalCode: p.ZIP, country: 'US',
    }],
    maritalStatus: p.MARITAL ? coding('http://terminology.hl7.org/CodeSystem/v3-MaritalStatus', p.MARITAL, MARITAL[p.MARITAL]) : { text: 'Never Married' },
    multipleBirthBoolean: false,
    communication: [{ language: coding('urn:ietf:bcp:47', 'en-US', 'English') }],
  });
};

const email = (p) => {
  const { given, family } = splitName(p);
  return { extension: [{ url: `${US_CORE}/us-core-direct`, valueBoolean: true }], system: 'email', value: `${given}.${family}@example.com`, use: 'work' };
};
const practitioner = (p) => drop({
  resourceType: 'Practitioner',
  id: p.Id,
  meta: { profile: [`${US_CORE}/us-core-practitioner`] },
  identifier: [{ system: NPI, value: npiOf(providerRow.get(p.Id)) }],
  active: true,
  name: [{ family: splitName(p).family, given: [splitName(p).given], prefix: ['Dr.'] }],
  telecom: [email(p)],
  address: [{ line: [p.ADDRESS], city: p.CITY, state: p.STATE, postalCode: p.ZIP, country: 'US' }],
  gender: p.GENDER === 'M' ? 'male' : 'female',
});
const roleId = (p) => createHash('sha256').update(`PractitionerRole|${p.Id}`).digest('hex').replace(/^(.{8})(.{4})(.{4})(.{4})(.{12}).*$/, '$1-$2-$3-$4-$5');
const practitionerRole = (p) => {
  const [code, display] = SPECIALTY[p.SPECIALITY] ?? SPECIALTY['GENERAL PRACTICE'];
  return drop({
    resourceType: 'PractitionerRole',
    id: roleId(p),
    meta: { profile: [`${US_CORE}/us-core-practitionerrole`] },
    practitioner: { reference: practitionerRef(p.Id), display: drName(p) },
    organization: { reference: `Organization?identifier=${SYNTHEA}|${p.ORGANIZATION}` },
    code: [coding(NUCC, code, display)],
    specialty: [coding(NUCC, code, display)],
    telecom: [email(p)],
  });
};
const encounter = (e) => {
  const provider = providerById.get(e.PROVIDER);
  return drop({
    resourceType: 'Encounter',
    id: e.Id,
    meta: { profile: [`${US_CORE}/us-core-encounter`] },
    identifier: [{ use: 'official', system: SYNTHEA, value: e.Id }],
    status: 'finished',
    class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: CLASS[e.ENCOUNTERCLASS] ?? 'AMB' },
    type: [coding('http://snomed.info/sct', e.CODE, e.DESCRIPTION)],
    subject: { reference: `Patient/${e.PATIENT}`, display: fullName(patientById.get(e.PATIENT)) },
    participant: [{
      type: [coding('http://terminology.hl7.org/CodeSystem/v3-ParticipationType', 'PPRF', 'primary performer')],
      period: { start: e.START, end: e.STOP },
      individual: { reference: practitionerRef(e.PROVIDER), display: drName(provider) },
    }],
    period: { start: e.START, end: e.STOP },
    reasonCode: e.REASONCODE ? [{ coding: [{ system: 'http://snomed.info/sct', code: e.REASONCODE, display: e.REASONDESCRIPTION }] }] : undefined,
    serviceProvider: { reference: `Organization?identifier=${SYNTHEA}|${e.ORGANIZATION}` },
  });
};

const ndjson = (rows) => rows.map((r) => `${JSON.stringify(r)}\n`).join('');
const seenProviders = providers.filter((p) => seen.has(p.Id));
writeFileSync(join(here, 'Patient.ndjson'), ndjson(patients.map(patient)));
writeFileSync(join(here, 'Practitioner.ndjson'), ndjson(seenProviders.map(practitioner)));
writeFileSync(join(here, 'PractitionerRole.ndjson'), ndjson(seenProviders.map(practitionerRole)));
writeFileSync(join(here, 'Encounter.ndjson'), ndjson(encounters.map(encounter)));
console.log(`written to ${here}: ${patients.length} patients, ${seenProviders.length} practitioners and roles, ${encounters.length} encounters`);
