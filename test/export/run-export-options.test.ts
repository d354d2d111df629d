/**
 * Issue 23: `runExport` checks its options by their own names (p-queue style), never by the CLI's flag names —
 * the CLI declares the same rules on its flags (test/cli/flags.test.ts). Each is refused before the mapping is
 * read (the mapping file here does not exist) with exit code 2.
 */
import { describe, expect, it } from 'vitest';
import { CareEtlError, ExitCode } from '../../src/core/issues.js';
import { runExport, type RunExportOptions } from '../../src/export/run-export.js';

const mappingFile = '/nonexistent/mapping.yaml';

const refused: [Partial<RunExportOptions>, string][] = [
  [{ format: 'ndjson', bom: true }, "Expected `bom` to be used with `format: 'csv'`, got `format: 'ndjson'`"],
  [{ format: 'ndjson', escapeFormulas: true }, "Expected `escapeFormulas` to be used with `format: 'csv'`, got `format: 'ndjson'`"],
  [{ columnNames: 'camel' }, 'Expected `columnNames` to be one of original, snake, got `camel`'],
  [{ format: 'xml' }, 'Expected `format` to be one of csv, ndjson, parquet, got `xml`'],
  [{ layout: 'tall' }, 'Expected `layout` to be one of long, wide, got `tall`'],
  [{ exportName: 'a', columnsFile: 'c.yaml' }, 'Expected `exportName` or `columnsFile`, got both'],
  [{ layout: 'wide', columnsFile: 'c.yaml' }, "Expected no `columnsFile` with `layout: 'wide'`, got `columnsFile: 'c.yaml'`"],
  [{ layout: 'wide', exportName: 'observations' }, "Expected no `exportName` with `layout: 'wide'`, got `exportName: 'observations'`"],
  [{ query: ['x'] }, 'Expected `query` entries to be key=value, got `x`'],
  [{ since: 'yesterday' }, 'Expected `since` to be `last`, an ISO date'],
  [{ patients: [' '] }, 'Expected `patients` to be patient source keys, got an empty value'],
  [{ overlapSeconds: -1 }, 'Expected `overlapSeconds` to be a number ≥ 0, got `-1`'],
  [{ pseudonymKeyFile: 'k' }, 'Expected `pseudonymKeyFile` to be used with `pseudonymize: true`, got `pseudonymize: false`'],
  [{ keepFreeText: true }, 'Expected `keepFreeText` to be used with `pseudonymize: true`, got `pseudonymize: false`'],
  [{ dictionary: '-' }, 'Expected `dictionary` to be a file path, got `-`'],
  [{ out: 'x.csv', dictionary: 'x.csv.partial' }, 'Expected `dictionary` to be another file than `out`, got `x.csv.partial` for both'],
];

describe('runExport validates its options by their own names', () => {
  it.each(refused)('%j', async (options, message) => {
    const err = await runExport({ mappingFile, ...options }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(CareEtlError);
    expect((err as CareEtlError).exitCode).toBe(ExitCode.config);
    expect((err as Error).message).toContain(message);
    expect((err as Error).message).not.toMatch(/`--/); // no CLI flag name
  });
});
