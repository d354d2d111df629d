import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { outputKindOf, writeOutputFile } from '../../src/core/secure-fs.js';

/*
 * Issue 26 item 5: which output paths are written in place (`stream`: a rename would replace a device node or starve
 * a FIFO's reader) and which through a temporary sibling and a rename (`file`). The device paths are only
 * classified here, never written to.
 */
describe('outputKindOf', () => {
  const dir = mkdtempSync(join(tmpdir(), 'care-etl-output-kind-'));

  test('a missing path, a regular file and a folder are files: written through a temporary sibling', () => {
    writeFileSync(join(dir, 'report.md'), 'old');
    mkdirSync(join(dir, 'folder'));
    expect(outputKindOf(join(dir, 'missing.csv'))).toBe('file');
    expect(outputKindOf(join(dir, 'report.md'))).toBe('file');
    expect(outputKindOf(join(dir, 'folder'))).toBe('file');
  });

  test('a FIFO is a stream', () => {
    const fifo = join(dir, 'rejects.fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    expect(outputKindOf(fifo)).toBe('stream');
  });

  test('character devices, /dev/fd/N (process substitution), /dev/stdout and anything under /dev or /proc are streams', () => {
    expect(statSync('/dev/null').isCharacterDevice()).toBe(true);
    expect(outputKindOf('/dev/null')).toBe('stream');
    expect(outputKindOf('/dev/fd/1')).toBe('stream');
    expect(outputKindOf('/dev/stdout')).toBe('stream');
    expect(outputKindOf('/proc/self/fd/2')).toBe('stream');
    expect(outputKindOf('/dev/not-there-yet')).toBe('stream'); // what `> /dev/x` would do: open in place, no rename in /dev
  });

  test('writeOutputFile: a regular file becomes 0600 through a rename; a FIFO gets the text in place and stays a FIFO', async () => {
    const file = join(dir, 'plan.json');
    writeFileSync(file, 'old', { mode: 0o644 });
    await writeOutputFile(file, '{"new":true}\n');
    expect(readFileSync(file, 'utf8')).toBe('{"new":true}\n');
    expect(statSync(file).mode & 0o777).toBe(0o600);

    const fifo = join(dir, 'plan.fifo');
    expect(spawnSync('mkfifo', ['-m', '644', fifo]).status).toBe(0);
    const [read] = await Promise.all([readFile(fifo, 'utf8'), writeOutputFile(fifo, '{"plan":1}\n')]);
    expect(read).toBe('{"plan":1}\n');
    expect(statSync(fifo).isFIFO()).toBe(true);
    expect(statSync(fifo).mode & 0o777).toBe(0o644);
  });
});
