import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createStudioSession } from '../../src/studio/session.js';
import { ROOT } from '../helpers/cli.js';

const MAPPINGS = [
  ...readdirSync(join(ROOT, 'mappings'), { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => `mappings/${d.name}/mapping.yaml`),
  'examples/clinic/mapping.yaml',
];

describe('studio on the shipped mappings', () => {
  it.each(MAPPINGS)('%s: every resource mapping evaluates without a mapping error, its sample rows told', async (file) => {
    const session = createStudioSession({ mappingFile: file, cwd: ROOT, sampleSize: 50 });
    try {
      const text = readFileSync(join(ROOT, file), 'utf8');
      const first = await session.evaluate({ text });
      expect(first.errors.filter((d) => d.severity === 'error')).toEqual([]);
      expect(first.resources.length).toBeGreaterThan(0);
      for (const { name } of first.resources) {
        const r = await session.evaluate({ text, resource: name, limit: 5 });
        expect(r.resource).toBe(name);
        expect(r.totals.sampled, name).toBeGreaterThan(0);
        expect(r.totals.loaded + r.totals.rejected + r.totals.skipped).toBe(r.totals.sampled);
        expect(r.rows.length).toBe(Math.min(5, r.page.total));
      }
    } finally {
      session.close();
    }
  });
});
