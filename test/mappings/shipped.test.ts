import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runMappingTests } from '../../src/mapping-tests/run-mapping-tests.js';
import { validateMapping } from '../../src/pipeline/validate-mapping.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAPPINGS = join(ROOT, 'mappings');
const folders = readdirSync(MAPPINGS, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name).sort();

const modeline = (file: string) => /^# yaml-language-server: \$schema=(\S+)\n/.exec(readFileSync(file, 'utf8'))?.[1];

describe('ready-made mappings', () => {
  it('are the five documented ones', () => {
    expect(folders).toEqual(['fhir-r4-bulk', 'generic-csv', 'omop-cdm', 'synthea', 'synthea-fhir']);
    const readme = readFileSync(join(MAPPINGS, 'README.md'), 'utf8');
    for (const f of folders) expect(readme).toContain(`(\`${f}/\`)`);
    expect(readFileSync(join(ROOT, 'README.md'), 'utf8')).toContain('[mappings/README.md](mappings/README.md)');
  });

  for (const name of folders) {
    describe(name, () => {
      const dir = join(MAPPINGS, name);
      const mapping = join(dir, 'mapping.yaml');
      const tests = readdirSync(dir).filter((f) => f.endsWith('.test.yaml'));

      it('starts with the editor modeline of the mapping schema; its test files with the test schema', () => {
        expect(resolve(dir, modeline(mapping)!)).toBe(join(ROOT, 'schemas', 'mapping.schema.json'));
        expect(tests.length).toBeGreaterThan(0);
        for (const t of tests) expect(resolve(dir, modeline(join(dir, t))!)).toBe(join(ROOT, 'schemas', 'mapping-test.schema.json'));
      });

      it('validates, and maps its whole sample without a rejection', async () => {
        const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CARE_') && !k.endsWith('_DIR')));
        const report = await validateMapping(mapping, { sample: 1000, env });
        for (const [m, s] of Object.entries(report.samples!)) expect(s.rejects, m).toEqual([]);
      });

      it('its tests pass, and the sample it reads is in the repository with its origin', async () => {
        const report = await runMappingTests([dir]);
        expect(report.exitCode).toBe(0);
        expect(report.totals.passed).toBe(report.totals.cases);
        expect(existsSync(join(dir, 'sample', 'SOURCE.md'))).toBe(true);
        expect(dirname(mapping)).toBe(dir);
      });
    });
  }
});
