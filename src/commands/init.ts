import { relative } from 'node:path';
import { CareCommand } from '../cli/base-command.js';
import { flag } from '../cli/flags.js';
import type { ErrorJson } from '../cli/render.js';
import type { StarterResult } from '../init/starter-mapping.js';

export type InitResult = Omit<StarterResult, 'text'> | ErrorJson;

export default class Init extends CareCommand<InitResult> {
  static override summary = 'Write a starter mapping file for the given export files.';
  static override description = `Reads the header (CSV) or the first records (JSON, NDJSON) of each export and writes a mapping with one resource per export: its type guessed from the file name and columns (MRN → Patient, NPI → Practitioner, both → CareTeam), every column listed as a commented field to fill in, and a \`$TODO("…")\` marker where a choice is needed. \`care-etl validate\` reports every marker left, with its text, line and column: the count printed here.

FHIR R4 resources (records with a \`resourceType\`: NDJSON, a JSON array or a Bundle) are recognised: Patient and Practitioner fields are copied as mappings/fhir-r4-bulk does, keys follow how the files refer to each other (\`Patient/<id>\`, \`urn:uuid:<id>\`, \`Practitioner?identifier=<system>|<NPI>\`), encounters become one care team per patient, and PractitionerRole (a specialty, not a practitioner) is a comment, not a mapping. The file points to the ready-made mappings/fhir-r4-bulk and mappings/synthea-fhir.

OMOP CDM v5.4 tables are recognised by their columns (person: person_id, gender_concept_id, year_of_birth, race_concept_id, ethnicity_concept_id; provider: provider_id, provider_name, npi, specialty_concept_id; visit_occurrence: visit_occurrence_id, person_id, visit_concept_id, visit_start_date, visit_type_concept_id; visit_detail; care_site), whatever the file names: person → Patient keyed by person_id, provider → Practitioner keyed by provider_id, visits → one care team per person whose members are the providers of the person's visits (visit_detail joined in when both are given), care_site not mapped. The file points to the ready-made mappings/omop-cdm.

A column empty in every sampled record is never chosen as a key. A CSV export that is not UTF-8 gets \`csv: { encoding: windows-1252 }\` (Latin-1 as Windows writes it) with a comment naming the first byte that is not UTF-8 and its line (bytes Windows-1252 does not define leave a \`$TODO\` for the encoding instead). A full-name column whose sampled values read "DOE, John" is split on the comma (family, then given names), "John Doe" on the space. A column whose name says nothing of dates (GEBDAT) but whose sampled values all are dates is proposed with its \`$date\` format (\`$date(GEBDAT, "DD.MM.YYYY")\`; the birth date when no column is named so): a day above 12 tells day-first from month-first, and when no sampled day is above 12 the format is a \`$TODO\` naming both readings — so is a column named as dates (DOB) of slash dates (03/04/1980): never MM/DD/YYYY by default.

Beside the mapping it writes mapping.schema.json, a copy of care-etl's mapping schema, named by the mapping's first line (\`# yaml-language-server: $schema=./mapping.schema.json\`): commit both, and editors find the schema wherever the repository is cloned, offline too.

An existing file is never overwritten without --force (an existing mapping.schema.json is kept; --force refreshes it after an upgrade).

Exit codes: 0 written; 2 an export cannot be read, or the output file exists.`;
  static override examples = [
    '<%= config.bin %> init --from patients.csv --from staff.json --from assignments.csv',
    '<%= config.bin %> init --from Patient.ndjson --out onboarding/mapping.yaml --force',
    '<%= config.bin %> init --from person.csv --from provider.csv --from visit_detail.csv',
  ];
  static override flags = {
    from: flag.from(),
    out: flag.out({ description: 'the mapping file to write', default: 'mapping.yaml' }),
    force: flag.force(),
  };

  async run(): Promise<InitResult> {
    const { flags } = await this.parse(Init);
    const [{ writeStarterMapping }, { table }] = await Promise.all([import('../init/starter-mapping.js'), import('../cli/render.js')]);
    try {
      const result = await writeStarterMapping({ from: flags.from, out: flags.out, force: flags.force });
      if (!this.jsonEnabled()) {
        this.log(`Wrote ${flags.out}:`);
        this.log(
          table(
            ['export', 'source', 'mapping', 'type', 'key'],
            result.resources.map((r) => [r.file, r.source, r.name, r.type ?? 'TODO', r.key ?? (r.groupBy ? `groupBy ${r.groupBy}` : 'TODO')]),
          ),
        );
        if (result.schemaCopy)
          this.log(`Wrote ${relative(process.cwd(), result.schemaCopy)} beside it (the mapping's $schema, for editor completion): commit both.`);
        for (const n of result.notes) this.log(`Not mapped: ${n.file} (${n.resourceType}) — ${n.note}.`);
        if (result.omopTables)
          this.log(`OMOP CDM tables recognised by their columns (${result.omopTables.join(', ')}): the ready-made mapping is mappings/omop-cdm/mapping.yaml.`);
        if (result.readyMade)
          this.log(
            `FHIR resources: ready-made mappings in ${result.readyMade.map((m) => relative(process.cwd(), m)).join(' and ')} (see the top of ${flags.out}).`,
          );
        this.log(
          result.todos
            ? `${result.todos} TODO marker${result.todos === 1 ? '' : 's'} to resolve: \`care-etl validate ${flags.out}\` lists each one with its text and position.`
            : `No TODO marker left: check the mapping on the first rows with \`care-etl validate ${flags.out} --sample 20\`${result.readyMade ? '' : ' after uncommenting the fields you need'}.`,
        );
      }
      const { text: _text, ...rest } = result;
      return rest;
    } catch (err) {
      return this.fail(err);
    }
  }
}
