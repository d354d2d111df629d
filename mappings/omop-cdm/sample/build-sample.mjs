// Writes the small synthetic OMOP CDM v5.4 export of mappings/omop-cdm/sample: person, provider, care_site,
// visit_occurrence and visit_detail as CSV, columns named and ordered exactly as the CDM v5.4 DDL
// (github.com/OHDSI/CommonDataModel, inst/ddl/5.4), standard concept ids of the OMOP vocabularies.
//   node mappings/omop-cdm/sample/build-sample.mjs
// Deterministic (a seeded generator, no clock): same script, same bytes. No real person: SOURCE.md.
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

// mulberry32: a tiny seeded generator, so that the sample never changes unless this script does.
let seed = 0x0a5e5d;
const rand = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const pad = (n, w = 2) => String(n).padStart(w, '0');
const iso = (d) => `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
const stamp = (d) => `${iso(d)} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:00`;
const addDays = (d, n) => new Date(d.getTime() + n * 86_400_000);

function writeCsv(file, columns, rows) {
  const cell = (v) => (v === undefined || v === null ? '' : /[",\n]/.test(String(v)) ? `"${String(v).replace(/"/g, '""')}"` : String(v));
  const lines = [columns.join(','), ...rows.map((r) => columns.map((c) => cell(r[c])).join(','))];
  writeFileSync(join(here, file), `${lines.join('\n')}\n`);
}

// ------------------------------------------------------------------ CDM v5.4 columns, in DDL order
const PERSON = ['person_id', 'gender_concept_id', 'year_of_birth', 'month_of_birth', 'day_of_birth', 'birth_datetime', 'race_concept_id', 'ethnicity_concept_id', 'location_id', 'provider_id', 'care_site_id', 'person_source_value', 'gender_source_value', 'gender_source_concept_id', 'race_source_value', 'race_source_concept_id', 'ethnicity_source_value', 'ethnicity_source_concept_id'];
const PROVIDER = ['provider_id', 'provider_name', 'npi', 'dea', 'specialty_concept_id', 'care_site_id', 'year_of_birth', 'gender_concept_id', 'provider_source_value', 'specialty_source_value', 'specialty_source_concept_id', 'gender_source_value', 'gender_source_concept_id'];
const CARE_SITE = ['care_site_id', 'care_site_name', 'place_of_service_concept_id', 'location_id', 'care_site_source_value', 'place_of_service_source_value'];
const VISIT_OCCURRENCE = ['visit_occurrence_id', 'person_id', 'visit_concept_id', 'visit_start_date', 'visit_start_datetime', 'visit_end_date', 'visit_end_datetime', 'visit_type_concept_id', 'provider_id', 'care_site_id', 'visit_source_value', 'visit_source_concept_id', 'admitted_from_concept_id', 'admitted_from_source_value', 'discharged_to_concept_id', 'discharged_to_source_value', 'preceding_visit_occurrence_id'];
const VISIT_DETAIL = ['visit_detail_id', 'person_id', 'visit_detail_concept_id', 'visit_detail_start_date', 'visit_detail_start_datetime', 'visit_detail_end_date', 'visit_detail_end_datetime', 'visit_detail_type_concept_id', 'provider_id', 'care_site_id', 'visit_detail_source_value', 'visit_detail_source_concept_id', 'admitted_from_concept_id', 'admitted_from_source_value', 'discharged_to_source_value', 'discharged_to_concept_id', 'preceding_visit_detail_id', 'parent_visit_detail_id', 'visit_occurrence_id'];

// ------------------------------------------------------------------ standard concepts used
const MALE = 8507; // Gender
const FEMALE = 8532;
const NO_MATCHING_CONCEPT = 0;
const RACES = [[8527, 'white'], [8527, 'white'], [8516, 'black'], [8515, 'asian'], [0, 'other']]; // Race
const ETHNICITIES = [[38003564, 'nonhispanic'], [38003564, 'nonhispanic'], [38003563, 'hispanic']]; // Ethnicity
const OUTPATIENT = 9202; // Visit
const INPATIENT = 9201;
const EMERGENCY = 9203;
const EHR = 32817; // Type Concept: EHR
const HOME = 8536; // Place of Service: Home (discharged to)

// ------------------------------------------------------------------ care_site
const careSites = [
  { care_site_id: 1, care_site_name: 'Riverside Family Practice', place_of_service_concept_id: 8940, care_site_source_value: 'CS-RFP', place_of_service_source_value: 'Office' },
  { care_site_id: 2, care_site_name: 'Northgate General Hospital', place_of_service_concept_id: 8717, care_site_source_value: 'CS-NGH', place_of_service_source_value: 'Inpatient Hospital' },
  { care_site_id: 3, care_site_name: 'Northgate Emergency Department', place_of_service_concept_id: 8870, care_site_source_value: 'CS-NED', place_of_service_source_value: 'Emergency Room - Hospital' },
];

// ------------------------------------------------------------------ provider (no NPI or DEA: empty in every row, as in many CDM instances)
const providers = [
  ['Ada Quill', 38004446, 'General Practice', 1, FEMALE],
  ['Basil Northcote', 38004453, 'Family Practice', 1, MALE],
  ['Celia Varga', 38004456, 'Internal Medicine', 2, FEMALE],
  ['Desmond Achebe', 38004455, 'Gastroenterology', 2, MALE],
  ['Elin Sorensen', 38004478, 'Geriatric Medicine', 3, FEMALE],
].map(([name, specialty, specialtyName, site, gender], i) => ({
  provider_id: i + 1,
  provider_name: name,
  specialty_concept_id: specialty,
  care_site_id: site,
  year_of_birth: int(1960, 1988),
  gender_concept_id: gender,
  provider_source_value: `PRV${pad(1001 + i * 17, 5)}`,
  specialty_source_value: specialtyName,
  specialty_source_concept_id: 0,
  gender_source_value: gender === MALE ? 'M' : 'F',
  gender_source_concept_id: 0,
}));

// ------------------------------------------------------------------ person
const persons = [];
for (let i = 0; i < 20; i++) {
  // one person whose gender is not mapped to a standard concept (source value U), as CDM instances have
  const g = i === 13 ? [NO_MATCHING_CONCEPT, 'U'] : rand() < 0.5 ? [MALE, 'M'] : [FEMALE, 'F'];
  const [race, raceSource] = pick(RACES);
  const [ethnicity, ethnicitySource] = pick(ETHNICITIES);
  const year = int(1931, 2015);
  const born = new Date(Date.UTC(year, int(0, 11), int(1, 28)));
  // birth precision as CDM instances have it: full date and datetime; date without datetime; year only
  const precision = i === 6 || i === 17 ? 'year' : i % 4 === 1 ? 'date' : 'datetime';
  persons.push({
    person_id: 101 + i * 3,
    gender_concept_id: g[0],
    year_of_birth: year,
    month_of_birth: precision === 'year' ? '' : born.getUTCMonth() + 1,
    day_of_birth: precision === 'year' ? '' : born.getUTCDate(),
    birth_datetime: precision === 'datetime' ? stamp(born) : '',
    race_concept_id: race,
    ethnicity_concept_id: ethnicity,
    location_id: '',
    provider_id: i % 3 === 0 ? pick([1, 2]) : '',
    care_site_id: 1,
    person_source_value: `P${pad(int(100000, 999999), 6)}`,
    gender_source_value: g[1],
    gender_source_concept_id: 0,
    race_source_value: raceSource,
    race_source_concept_id: 0,
    ethnicity_source_value: ethnicitySource,
    ethnicity_source_concept_id: 0,
  });
}

// ------------------------------------------------------------------ visit_occurrence (60) and visit_detail
// Visits per person: 3 on average, at least 1; the first visit of each person names a provider, some later
// ones do not (provider_id empty), as in exports where the attending provider is not always known.
const counts = persons.map(() => 1);
for (let n = persons.length; n < 60; n++) counts[int(0, persons.length - 1)]++;
const visits = [];
const details = [];
let visitId = 5001;
let detailId = 9001;
persons.forEach((p, pi) => {
  let day = new Date(Date.UTC(2019, 0, 2));
  day = addDays(day, int(0, 400));
  let previous = '';
  for (let k = 0; k < counts[pi]; k++) {
    const r = rand();
    const kind = r < 0.75 ? OUTPATIENT : r < 0.9 ? EMERGENCY : INPATIENT;
    const start = new Date(day.getTime() + int(8, 16) * 3_600_000 + pick([0, 15, 30, 45]) * 60_000);
    const end = kind === INPATIENT ? addDays(start, int(2, 6)) : new Date(start.getTime() + (kind === EMERGENCY ? int(3, 9) : 1) * 3_600_000);
    const site = kind === OUTPATIENT ? 1 : kind === INPATIENT ? 2 : 3;
    const byProvider = kind === OUTPATIENT ? [1, 2][pi % 2] : kind === INPATIENT ? pick([3, 4]) : 5;
    const provider = k > 0 && rand() < 0.2 ? '' : kind === OUTPATIENT && rand() < 0.25 ? pick([1, 2, 3]) : byProvider;
    const v = {
      visit_occurrence_id: visitId++,
      person_id: p.person_id,
      visit_concept_id: kind,
      visit_start_date: iso(start),
      visit_start_datetime: stamp(start),
      visit_end_date: iso(end),
      visit_end_datetime: stamp(end),
      visit_type_concept_id: EHR,
      provider_id: provider,
      care_site_id: site,
      visit_source_value: `ENC${pad(visitId * 7 + 3, 6)}`,
      visit_source_concept_id: 0,
      admitted_from_concept_id: kind === INPATIENT ? 8870 : 0,
      admitted_from_source_value: kind === INPATIENT ? 'ED' : '',
      discharged_to_concept_id: kind === OUTPATIENT ? 0 : HOME,
      discharged_to_source_value: kind === OUTPATIENT ? '' : 'home',
      preceding_visit_occurrence_id: previous,
    };
    visits.push(v);
    previous = v.visit_occurrence_id;
    // Hospital visits have their ward / department stays in visit_detail, each with its own provider.
    if (kind !== OUTPATIENT) {
      const stays = kind === INPATIENT ? 2 : 1;
      let prevDetail = '';
      for (let s = 0; s < stays; s++) {
        const dStart = s === 0 ? start : addDays(start, 1);
        const dEnd = s === stays - 1 ? end : addDays(start, 1);
        const d = {
          visit_detail_id: detailId++,
          person_id: p.person_id,
          visit_detail_concept_id: kind,
          visit_detail_start_date: iso(dStart),
          visit_detail_start_datetime: stamp(dStart),
          visit_detail_end_date: iso(dEnd),
          visit_detail_end_datetime: stamp(dEnd),
          visit_detail_type_concept_id: EHR,
          provider_id: kind === INPATIENT ? [3, 4][s] : 5,
          care_site_id: site,
          visit_detail_source_value: `${v.visit_source_value}-${s + 1}`,
          visit_detail_source_concept_id: 0,
          admitted_from_concept_id: 0,
          admitted_from_source_value: '',
          discharged_to_source_value: s === stays - 1 ? 'home' : '',
          discharged_to_concept_id: s === stays - 1 ? HOME : 0,
          preceding_visit_detail_id: prevDetail,
          parent_visit_detail_id: '',
          visit_occurrence_id: v.visit_occurrence_id,
        };
        details.push(d);
        prevDetail = d.visit_detail_id;
      }
    }
    day = addDays(end, int(20, 240));
    day = new Date(Date.UTC(day.getUTCFullYear(), day.getUTCMonth(), day.getUTCDate()));
  }
});

writeCsv('care_site.csv', CARE_SITE, careSites);
writeCsv('provider.csv', PROVIDER, providers);
writeCsv('person.csv', PERSON, persons);
writeCsv('visit_occurrence.csv', VISIT_OCCURRENCE, visits);
writeCsv('visit_detail.csv', VISIT_DETAIL, details);
console.log(`person ${persons.length}, provider ${providers.length}, care_site ${careSites.length}, visit_occurrence ${visits.length} (${visits.filter((v) => v.provider_id === '').length} without provider_id), visit_detail ${details.length}`);
