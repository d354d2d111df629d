import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ByteEta, createRunProgress, describeBytes, formatBytes, formatDuration } from '../../src/cli/run-progress.js';
import { runPipeline } from '../../src/pipeline/run-pipeline.js';
import type { ByteProgress, MappingCounts, RunEvent } from '../../src/pipeline/run-report.js';
import { openSource, SourceBytes } from '../../src/sources/open-source.js';
import { copyTree, ROOT } from '../helpers/cli.js';

/*
 * Issue 14, item 5: progress that says where a long run is — the share of the source read (bytes: known up front,
 * rows are not) and an ETA, per mapping (a phase reads one source). The clock is injected: no timing here.
 */

const counts = (c: Partial<MappingCounts> = {}): MappingCounts => ({
  read: 0,
  skipped: 0,
  created: 0,
  updated: 0,
  unchanged: 0,
  adopted: 0,
  rejected: 0,
  ended: 0,
  written: 0,
  ...c,
});

describe('byte progress formatting', () => {
  it('sizes in SI units, both sides of the slash in the unit of the total', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(3_500)).toBe('3.5 kB');
    expect(formatBytes(12_300_000)).toBe('12.3 MB');
    expect(formatBytes(1_500_000_000)).toBe('1.5 GB');
    expect(formatBytes(500_000, 48_000_000)).toBe('0.5 MB');
    expect(formatBytes(0, 48_000_000)).toBe('0.0 MB');
  });

  it('durations as coarse as an ETA: seconds rounded up', () => {
    expect(formatDuration(0)).toBe('< 1 s');
    expect(formatDuration(999)).toBe('< 1 s');
    expect(formatDuration(44_100)).toBe('45 s');
    expect(formatDuration(80_000)).toBe('1 min 20 s');
    expect(formatDuration(120_000)).toBe('2 min');
    expect(formatDuration(3_900_000)).toBe('1 h 05 min');
    expect(formatDuration(Number.NaN)).toBe('< 1 s');
  });

  it('read / total (percent, rounded down) · ETA; just what was read when the size is unknown (a FIFO)', () => {
    expect(describeBytes({ read: 12_300_000, total: 48_000_000 }, 80_000)).toBe('12.3 MB / 48.0 MB (25 %) · ETA 1 min 20 s');
    expect(describeBytes({ read: 47_999_999, total: 48_000_000 })).toBe('48.0 MB / 48.0 MB (99 %)');
    expect(describeBytes({ read: 48_000_000, total: 48_000_000 })).toBe('48.0 MB / 48.0 MB (100 %)');
    expect(describeBytes({ read: 0, total: 0 })).toBe('0 B / 0 B (100 %)');
    expect(describeBytes({ read: 12_300_000 })).toBe('12.3 MB read');
  });
});

describe('ETA from bytes read (injected clock)', () => {
  it('rate measured from the first sample, once a second of reading is behind it', () => {
    let t = 0;
    const eta = new ByteEta(() => t);
    const total = 48_000_000;
    expect(eta.update({ read: 300_000, total })).toBeUndefined(); // the first sample: the first chunks, read at once
    t = 500;
    expect(eta.update({ read: 450_000, total })).toBeUndefined(); // under a second: too early to tell
    t = 40_000;
    // 12 MB in 40 s = 300 kB/s; 35.7 MB left → 119 s
    expect(eta.update({ read: 12_300_000, total })).toBeCloseTo(119_000, 6);
    expect(describeBytes({ read: 12_300_000, total }, eta.update({ read: 12_300_000, total }))).toBe('12.3 MB / 48.0 MB (25 %) · ETA 1 min 59 s');
    t = 41_000;
    expect(eta.update({ read: total, total })).toBeUndefined(); // all read
  });

  it('no ETA without a size, nor while nothing more was read', () => {
    let t = 0;
    const eta = new ByteEta(() => t);
    eta.update({ read: 100 });
    t = 5_000;
    expect(eta.update({ read: 1_000 })).toBeUndefined();
    const stalled = new ByteEta(() => t);
    stalled.update({ read: 100, total: 1_000 });
    t = 60_000;
    expect(stalled.update({ read: 100, total: 1_000 })).toBeUndefined();
  });

  it('plain progress lines carry where the source is and the ETA, per mapping', async () => {
    let t = 0;
    const out: string[] = [];
    const p = await createRunProgress({ tty: false, write: (l) => out.push(l), now: () => t, intervalMs: 2_000 });
    const total = 48_000_000;
    const progress = (mapping: string, read: number, c: Partial<MappingCounts>, bytes: ByteProgress | undefined = { read, total }): RunEvent => ({
      type: 'progress',
      mapping,
      counts: counts(c),
      bytes,
    });
    p.onEvent({ type: 'phase-start', mapping: 'patient', resourceType: 'Patient' });
    p.onEvent(progress('patient', 300_000, { read: 10, created: 9 }));
    t = 1_000;
    p.onEvent(progress('patient', 700_000, { read: 40, created: 39 })); // within the interval: not printed
    t = 40_000;
    p.onEvent(progress('patient', 12_300_000, { read: 1000, created: 990, rejected: 3 }));
    p.onEvent({ type: 'phase-end', mapping: 'patient', counts: counts({ read: 4000, created: 3990, rejected: 10 }), bytes: { read: total, total } });
    p.onEvent({ type: 'phase-start', mapping: 'careteam', resourceType: 'CareTeam' });
    t = 50_000;
    p.onEvent(progress('careteam', 2_000, { read: 5, notSelected: 4, created: 1 }, { read: 2_000 })); // a FIFO: no size
    p.stop();
    expect(out).toEqual([
      '[patient] Patient: started',
      '[patient] 0.3 MB / 48.0 MB (0 %) · read 10 · created 9 · updated 0 · unchanged 0 · rejected 0',
      '[patient] 12.3 MB / 48.0 MB (25 %) · ETA 1 min 59 s · read 1000 · created 990 · updated 0 · unchanged 0 · rejected 3',
      '[patient] done: read 4000 · created 3990 · updated 0 · unchanged 0 · rejected 10',
      '[careteam] CareTeam: started',
      '[careteam] 2.0 kB read · read 5 · not selected 4 · created 1 · updated 0 · unchanged 0 · rejected 0',
    ]);
  });

  it('without bytes (e.g. `plan`), the lines are as before', async () => {
    const out: string[] = [];
    const p = await createRunProgress({ tty: false, write: (l) => out.push(l), now: () => 0 });
    p.onEvent({ type: 'progress', mapping: 'patient', counts: counts({ read: 1, created: 1 }) });
    expect(out).toEqual(['[patient] read 1 · created 1 · updated 0 · unchanged 0 · rejected 0']);
  });
});

describe('the bars on a terminal', () => {
  it('one frame per tick however many events come in it; the last frame shows the last counts, bytes and ETA', async () => {
    let t = 1_000;
    let out = '';
    const stream = { columns: 120, isTTY: false, write: (text: string) => (out += text) };
    const p = await createRunProgress({ tty: true, write: () => {}, now: () => t, stream });
    const total = 48_000_000;
    p.onEvent({ type: 'phase-start', mapping: 'patient', resourceType: 'Patient' });
    for (let i = 1; i <= 300; i++) {
      if (i === 300) t = 41_000;
      p.onEvent({ type: 'progress', mapping: 'patient', counts: counts({ read: i, created: i }), bytes: { read: i * 41_000, total } });
    }
    p.stop();
    const frames = out.split('\r\x1b[J');
    expect(frames).toHaveLength(2); // the first frame, then the last (drawn by stop) erasing it
    expect(frames[1]).toContain('  patient [');
    expect(frames[1]).toContain('] 300/300 rows · ETA 1 min 57 s · created 300 · updated 0 · unchanged 0 · 12.3 MB / 48.0 MB (25 %)');
  });
});

describe('sources report the bytes they read', () => {
  it('a CSV, JSON and NDJSON source: the file size up front, all of it read at the end', async () => {
    for (const [name, path, records] of [
      ['patients', 'test/fixtures/sources/patients.csv', undefined],
      ['staff', 'test/fixtures/sources/staff.json', 'staff'],
      ['patients', 'test/fixtures/sources/patients.ndjson', undefined],
    ] as const) {
      const file = join(ROOT, path);
      const bytes = new SourceBytes();
      expect(bytes.snapshot()).toBeUndefined(); // nothing opened yet
      let rows = 0;
      for await (const item of openSource({ name, path: file, records }, { bytes })) {
        if (item.ok) rows++;
        expect(bytes.total).toBe(statSync(file).size);
      }
      expect(rows).toBeGreaterThan(0);
      expect(bytes.snapshot()).toEqual({ read: statSync(file).size, total: statSync(file).size });
    }
  });

  it('a meter with no size known (a FIFO) leaves the total out', () => {
    const bytes = new SourceBytes();
    bytes.attach({ bytesRead: 42 }, undefined);
    expect(bytes.snapshot()).toEqual({ read: 42 });
  });

  it("run progress events carry the bytes of the phase's source, growing to its size", async () => {
    const dir = copyTree('test/fixtures/run/clean', 'care-etl-progress-');
    const csv = join(dir, 'data', 'patients.csv');
    const rows = ['MRN,FIRST,LAST,DOB,SEX'];
    for (let i = 0; i < 20_000; i++) rows.push(`${String(i).padStart(6, '0')},Ann,Lee,01/03/1989,F`);
    writeFileSync(csv, `${rows.join('\n')}\n`);
    const size = statSync(csv).size;
    expect(size).toBeGreaterThan(512 * 1024); // several 64 KiB chunks

    const events: RunEvent[] = [];
    const report = await runPipeline({
      mappingFile: join(dir, 'mapping.yaml'),
      dryRun: true,
      outDir: join(dir, 'out'),
      env: {},
      onEvent: (e) => events.push(e),
    });
    expect(report.totals).toMatchObject({ read: 20_000, written: 20_000, rejected: 0 });

    const progress = events.flatMap((e) => (e.type === 'progress' ? [e.bytes!] : []));
    expect(progress).toHaveLength(20_000);
    for (const b of progress) expect(b.total).toBe(size);
    // read grows with the rows (never back), from part of the file to all of it
    for (let i = 1; i < progress.length; i++) expect(progress[i]!.read).toBeGreaterThanOrEqual(progress[i - 1]!.read);
    expect(progress[0]!.read).toBeLessThan(size);
    expect(progress.at(-1)!.read).toBe(size);
    const end = events.find((e) => e.type === 'phase-end');
    expect(end?.type === 'phase-end' && end.bytes).toEqual({ read: size, total: size });
  });
});
