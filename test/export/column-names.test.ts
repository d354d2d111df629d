/** Issue 27 item 3: `--column-names snake` — SQL identifiers, unique after the change, mapped back by the caller. */
import { describe, expect, it } from 'vitest';
import type { CompiledExport } from '../../src/mapping/compile-mapping.js';
import { defaultColumnNames, outputNames, renameExport, snakeName } from '../../src/export/column-names.js';

describe('column names', () => {
  it('snakes headers into SQL identifiers', () => {
    expect(snakeName('PHQ-9 (44261-6)')).toBe('phq_9_44261_6');
    expect(snakeName("'=GAD-7 total score")).toBe('gad_7_total_score');
    expect(snakeName('Échelle de dépression')).toBe('echelle_de_depression');
    expect(snakeName('44261-6')).toBe('c_44261_6');
    expect(snakeName('—')).toBe('column');
    expect(snakeName('x'.repeat(100))).toHaveLength(63);
  });

  it('suffixes names that collide after the change, in column order', () => {
    expect(outputNames(['PHQ-9 total', 'phq 9 total', 'PHQ_9_TOTAL', 'phq_9_total_2'], 'snake')).toEqual([
      'phq_9_total',
      'phq_9_total_2',
      'phq_9_total_3',
      'phq_9_total_2_2',
    ]);
    expect(outputNames(['A b', 'A b'], 'original')).toEqual(['A b', 'A b_2']);
  });

  it('defaults to snake for Parquet only', () => {
    expect([defaultColumnNames('csv'), defaultColumnNames('ndjson'), defaultColumnNames('parquet')]).toEqual(['original', 'original', 'snake']);
  });

  it('renames the rows and the column sources of a long export', async () => {
    const ex: CompiledExport & { sources: Map<string, { expr: string }> } = {
      name: 'x',
      columns: ['Total Score', 'id'],
      sources: new Map([['Total Score', { expr: 'valueInteger' }]]),
      evalRow: async () => ({ 'Total Score': 3, id: 'a' }),
    };
    const renamed = renameExport(ex, 'snake');
    expect(renamed.columns).toEqual(['total_score', 'id']);
    expect([...renamed.sources!.keys()]).toEqual(['total_score']);
    expect(await renamed.evalRow({}, { now: new Date() })).toEqual({ total_score: 3, id: 'a' });
    expect(renameExport(ex, 'original')).toBe(ex);
  });
});
