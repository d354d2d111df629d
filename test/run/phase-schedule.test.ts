/**
 * Issue 28: which mappings of a run start together (src/pipeline/phase-schedule.ts) — from a real compiled mapping
 * (the example clinic's), and the scheduler's own rules: a mapping starts once its prerequisites are done; after a
 * `stop` or a failure nothing new starts, and what runs is waited for.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compileMapping } from '../../src/mapping/compile-mapping.js';
import { loadMapping } from '../../src/mapping/load-mapping.js';
import { phasePrerequisites, runScheduled } from '../../src/pipeline/phase-schedule.js';
import { ROOT } from '../helpers/cli.js';

describe('phase schedule', () => {
  it('the example clinic: practitioner alongside patient, careteam after both (its `$ref`s)', async () => {
    const compiled = compileMapping(await loadMapping(join(ROOT, 'examples/clinic/mapping.yaml'), { env: {} }));
    expect(Object.fromEntries(phasePrerequisites(compiled))).toEqual({ patient: [], practitioner: [], careteam: ['patient', 'practitioner'] });
  });

  it('starts a mapping when its prerequisites are done, never before', async () => {
    const events: string[] = [];
    const gates = new Map<string, () => void>();
    const runOne = (name: string) =>
      new Promise<'next'>((resolve) => {
        events.push(`start ${name}`);
        gates.set(name, () => {
          events.push(`end ${name}`);
          resolve('next');
        });
      });
    const done = runScheduled(['a', 'b', 'c'], new Map([['c', ['a', 'b']]]), runOne);
    await new Promise((r) => setImmediate(r));
    expect(events).toEqual(['start a', 'start b']);
    gates.get('a')!();
    await new Promise((r) => setImmediate(r));
    expect(events).toEqual(['start a', 'start b', 'end a']);
    gates.get('b')!();
    await new Promise((r) => setImmediate(r));
    expect(events.at(-1)).toBe('start c');
    gates.get('c')!();
    await done;
  });

  it('after a stop or a failure nothing new starts; the running ones are waited for, then the failure is thrown', async () => {
    const started: string[] = [];
    let finishB!: () => void;
    const bDone = new Promise<void>((r) => (finishB = r));
    let bEnded = false;
    const run = runScheduled(['a', 'b', 'c'], new Map([['c', ['a']]]), async (name) => {
      started.push(name);
      if (name === 'a') throw new Error('the state file failed');
      await bDone;
      bEnded = true;
      return 'next';
    });
    const outcome = run.then(
      () => 'resolved',
      (e: Error) => e.message,
    );
    await new Promise((r) => setImmediate(r));
    finishB();
    expect(await outcome).toBe('the state file failed');
    expect(bEnded).toBe(true);
    expect(started).toEqual(['a', 'b']);

    const stopped: string[] = [];
    await runScheduled(['a', 'b'], new Map([['b', ['a']]]), async (name) => {
      stopped.push(name);
      return 'stop';
    });
    expect(stopped).toEqual(['a']);
  });

  it('a failure halts the mappings running alongside (their signal aborts) and the first failure in time is thrown', async () => {
    // review s29-rev2: b (before a in order) kept loading after a failed, and its own later error replaced a's
    const halt = new AbortController();
    const run = runScheduled(
      ['b', 'a'],
      new Map(),
      async (name) => {
        if (name === 'a') {
          await new Promise((r) => setImmediate(r));
          throw new Error('the source of a is unreadable');
        }
        // b runs until told to stop, then fails with the abort (as loadPhase does)
        await new Promise<void>((resolve, reject) => {
          const t = setTimeout(resolve, 2000);
          halt.signal.addEventListener('abort', () => {
            clearTimeout(t);
            reject(new Error('b halted'));
          });
        });
        return 'next';
      },
      halt,
    );
    const t0 = Date.now();
    await expect(run).rejects.toThrow('the source of a is unreadable');
    expect(halt.signal.aborted).toBe(true);
    expect(Date.now() - t0).toBeLessThan(1000);
  });
});
