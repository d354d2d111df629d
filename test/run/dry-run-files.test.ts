import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CareEtlError } from '../../src/core/issues.js';
import { DryRunFiles } from '../../src/pipeline/dry-run-files.js';

// A dry run's lines are written in batches of about 64 KiB: these files span several batches.
const lines = (n: number, tag: string) => Array.from({ length: n }, (_, i) => JSON.stringify({ resourceType: tag, id: i, pad: 'x'.repeat(100) }));

describe('DryRunFiles (a dry run writes its NDJSON in batches)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(os.tmpdir(), 'care-etl-dry-files-'));
  });
  afterEach(() => {
    delete process.env.CARE_ETL_TEST_ENOSPC;
    rmSync(dir, { recursive: true, force: true });
  });

  it('every line of every type, in order, across batches; files 0600; a type opened but never written is an empty file', async () => {
    const files = new DryRunFiles(dir);
    files.open('CareTeam');
    const patients = lines(2000, 'Patient');
    const practitioners = lines(700, 'Practitioner');
    for (let i = 0; i < patients.length; i++) {
      await files.write('Patient', patients[i]!);
      if (i < practitioners.length) await files.write('Practitioner', practitioners[i]!);
    }
    await files.end();
    await files.close();
    expect(readFileSync(join(dir, 'Patient.ndjson'), 'utf8')).toBe(`${patients.join('\n')}\n`);
    expect(readFileSync(join(dir, 'Practitioner.ndjson'), 'utf8')).toBe(`${practitioners.join('\n')}\n`);
    expect(readFileSync(join(dir, 'CareTeam.ndjson'), 'utf8')).toBe('');
    for (const t of ['Patient', 'Practitioner', 'CareTeam']) expect(statSync(join(dir, `${t}.ndjson`)).mode & 0o777).toBe(0o600);
  });

  it('closed without end (an interrupted or failed run): the lines written so far are all in the file', async () => {
    const files = new DryRunFiles(dir);
    const patients = lines(1234, 'Patient');
    for (const l of patients) await files.write('Patient', l);
    await files.close();
    expect(readFileSync(join(dir, 'Patient.ndjson'), 'utf8')).toBe(`${patients.join('\n')}\n`);
  });

  it('a disk that is full for the last batch: end() rejects with write-failed naming the file', async () => {
    const file = join(dir, 'Patient.ndjson');
    process.env.CARE_ETL_TEST_ENOSPC = file;
    const files = new DryRunFiles(dir);
    await files.write('Patient', lines(1, 'Patient')[0]!); // under one batch: written by end()
    const err = await files.end().then(
      () => undefined,
      (e: unknown) => e,
    );
    await files.close();
    expect(err).toBeInstanceOf(CareEtlError);
    expect((err as CareEtlError).message).toContain(`cannot write ${file}: the disk is full (ENOSPC)`);
  });
});
