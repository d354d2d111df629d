import { describe, expect, it } from 'vitest';
import stringWidth from 'string-width';
import { barLine } from '../../src/cli/terminal-bars.js';
import { LiveArea, colourOn, fitLine, isoStamp, painter, stampedWriter, wrapLines } from '../../src/cli/terminal.js';
import { formatDuration } from '../../src/cli/run-progress.js';
import type { MappingCounts } from '../../src/pipeline/run-report.js';

const counts: MappingCounts = { read: 15103, skipped: 0, created: 12000, updated: 2000, unchanged: 1096, adopted: 3, rejected: 7, ended: 0, written: 0 };

describe('the live display fits the width', () => {
  it('a bar line never exceeds the width, from 12 to 200 columns, and drops whole parts as it narrows', () => {
    for (const paint of [painter(false), painter(true)])
      for (let w = 12; w <= 200; w++) {
        const l = barLine(
          { mapping: 'practitioner', counts, bytes: { read: 5e6, total: 9e6 }, where: '5.0 MB / 9.0 MB', etaMs: 80_000, done: false },
          w,
          paint,
          formatDuration,
        );
        expect(stringWidth(l), `${w}: ${l}`).toBeLessThanOrEqual(w);
      }
    const narrow = barLine({ mapping: 'patient', counts, done: false }, 50, painter(false), formatDuration);
    expect(narrow).toContain('15103/15103 rows');
    expect(narrow).not.toContain('created'); // dropped whole, not cut
    expect(barLine({ mapping: 'patient', counts, done: false }, 160, painter(false), formatDuration)).toContain('7 rejected · created 12000');
  });

  it('fitLine cuts by display width (CJK, colour) with an ellipsis; wrapLines keeps every word and indents', () => {
    expect(stringWidth(fitLine('患者'.repeat(30), 21))).toBeLessThanOrEqual(21);
    expect(fitLine('short', 10)).toBe('short');
    const lines = wrapLines('✗ data/patients.csv:33 [patient key 000031] transform: the value is not a valid date in format MM/DD/YYYY', 40, '    ', '  ');
    expect(lines.every((l) => stringWidth(l) <= 40)).toBe(true);
    expect(lines[0].startsWith('  ✗')).toBe(true);
    expect(lines.slice(1).every((l) => l.startsWith('    '))).toBe(true);
    expect(lines.join(' ').replace(/\s+/g, ' ')).toContain('not a valid date in format MM/DD/YYYY');
  });
});

describe('colour and timestamps', () => {
  it('NO_COLOR wins, FORCE_COLOR forces, else only a TTY', () => {
    expect(colourOn({ write: () => 0, isTTY: true }, { NO_COLOR: '1', FORCE_COLOR: '1' })).toBe(false);
    expect(colourOn({ write: () => 0, isTTY: false }, { FORCE_COLOR: '1' })).toBe(true);
    expect(colourOn({ write: () => 0, isTTY: true }, { FORCE_COLOR: '0' })).toBe(false);
    expect(colourOn({ write: () => 0, isTTY: true }, {})).toBe(true);
    expect(colourOn({ write: () => 0, isTTY: false }, {})).toBe(false);
  });

  it('a log line starts with its ISO timestamp, to the second', () => {
    const out: string[] = [];
    stampedWriter(
      (t) => out.push(t),
      () => new Date('2026-11-25T19:20:01.734Z'),
    )('[patient] done: read 35');
    expect(out).toEqual(['2026-11-25T19:20:01Z [patient] done: read 35\n']);
    expect(isoStamp(new Date(0))).toBe('1970-01-01T00:00:00Z');
  });
});

describe('the redraw area', () => {
  it('another write while the bars are up goes above them: bars erased first, redrawn after, none left behind', () => {
    const out: string[] = [];
    const stream = { columns: 40, isTTY: true, write: (t: string) => out.push(t) };
    const area = new LiveArea(stream, 10, () => 1000);
    area.update(['  patient [████░░░░] 5/20 rows']);
    out.length = 0;
    stream.write('[http] POST /Patient → 200 23 ms\n');
    expect(out).toEqual(['\x1b[1A\r\x1b[J', '[http] POST /Patient → 200 23 ms\n', '  patient [████░░░░] 5/20 rows\n']);
    area.stop();
    out.length = 0;
    stream.write('after\n'); // the stream is its own again
    expect(out).toEqual(['after\n']);
  });

  it('content given as a function is made only when a frame is drawn: the many progress events of a run within a frame format nothing', () => {
    const out: string[] = [];
    const stream = { columns: 40, isTTY: true, write: (t: string) => out.push(t) };
    let t = 1000;
    const area = new LiveArea(stream, 10, () => t);
    let made = 0;
    let row = 0;
    const lines = () => {
      made++;
      return [`  patient ${row}/5000 rows`];
    };
    for (row = 1; row <= 5000; row++) {
      area.update(lines);
      if (row % 2500 === 0) t += 100; // two frames' time passes over the 5,000 events
    }
    row = 5000;
    area.stop();
    expect(made).toBeLessThanOrEqual(3); // the first frame, one after 100 ms, the last one at stop
    expect(out.at(-2)).toContain('  patient 5000/5000 rows'); // the last frame shows the state at its drawing
  });
});
