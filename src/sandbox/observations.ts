/** Deterministic questionnaire Observations: same seed + same order of patient creations ⇒ same values. */

/** 32-bit FNV-1a: turns a text key into a PRNG seed. */
export function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** mulberry32: tiny, fast, good enough for test data and fault rates. Returns floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Instrument {
  text: string;
  loinc: string;
  display: string;
  max: number;
}

export const INSTRUMENTS: readonly Instrument[] = [
  {
    text: 'PHQ-9 total score',
    loinc: '44261-6',
    display: 'Patient Health Questionnaire 9 item (PHQ-9) total score [Reported]',
    max: 27,
  },
  {
    text: 'GAD-7 total score',
    loinc: '70274-6',
    display: 'Generalized anxiety disorder 7 item (GAD-7) total score [Reported.PHQ]',
    max: 21,
  },
];

const CATEGORY = [
  {
    coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'survey', display: 'Survey' }],
    text: 'Survey',
  },
];

/**
 * How real servers label questionnaires: line breaks (LF, CR, CRLF), tabs, quotes, commas and leading
 * formula characters in `code.text` (issue 13: an independent server's "WHO-5 Well-Being Index" LF "raw score"
 * broke the CSV). Chosen by a hash of the observation, so the values and dates stay what they were.
 */
function textVariant(text: string, pick: number): string {
  const [name, ...rest] = text.split(' ');
  const tail = rest.join(' ');
  const variants = [
    text,
    `${name}\n${tail}`,
    `${text}\r\n(self-report)`,
    `=${text}`,
    `\t${name}\t${tail}`,
    `${name} "${tail}", raw\rscore`,
    `-${text}`,
    `@${name}\u0007${tail}`,
  ];
  return variants[pick % variants.length]!;
}

/**
 * `coded` (default): `code` carries a LOINC coding and a text; `text-only`: only `code.text`, as the service
 * spec's Observation table shows it (an independent server following the spec sends no codings).
 */
export type ObservationCodeMode = 'coded' | 'text-only';
export const OBSERVATION_CODE_MODES: readonly ObservationCodeMode[] = ['coded', 'text-only'];

const YEAR_2024_MS = Date.UTC(2024, 0, 1);
const YEAR_MS = 365 * 24 * 3600 * 1000;

/**
 * The k-th observation of a patient, minus id/meta. `key` identifies the patient's place in the creation
 * sequence (never its random id) so the values repeat across runs; instruments alternate PHQ-9, GAD-7.
 */
export function makeObservation(seed: number, key: string, k: number, patientId: string, codeMode: ObservationCodeMode = 'coded'): Record<string, unknown> {
  const rand = mulberry32(hash32(`${seed}|${key}|${k}`));
  const inst = INSTRUMENTS[k % INSTRUMENTS.length]!;
  const effective = new Date(YEAR_2024_MS + Math.floor((rand() * YEAR_MS) / 1000) * 1000).toISOString();
  const ref = { reference: `Patient/${patientId}` };
  const text = textVariant(inst.text, hash32(`${seed}|${key}|${k}|text`));
  return {
    resourceType: 'Observation',
    status: 'final',
    category: CATEGORY,
    code: codeMode === 'text-only' ? { text } : { coding: [{ system: 'http://loinc.org', code: inst.loinc, display: inst.display }], text },
    subject: ref,
    effectiveDateTime: effective.replace('.000Z', 'Z'),
    performer: [ref],
    valueInteger: Math.floor(rand() * (inst.max + 1)),
  };
}
