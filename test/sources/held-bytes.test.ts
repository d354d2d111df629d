/**
 * HeldBytes (byte-window.ts): the bytes a CSV stage holds while a record is open, a chunk appended at a time in
 * amortised linear time. Against `Buffer.concat` as the model, over generated appends and drops from the front: the
 * held bytes are the model's, and bytes handed on before (the front the caller dropped) are never rewritten.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HeldBytes } from '../../src/sources/byte-window.js';

const SEED = Number(process.env.CARE_PROPERTY_SEED ?? 20_251_126);

const step = fc.oneof(fc.record({ append: fc.uint8Array({ minLength: 0, maxLength: 40 }) }), fc.record({ drop: fc.nat({ max: 60 }) }));

describe('HeldBytes', () => {
  it('holds what Buffer.concat would, and never rewrites bytes dropped from the front', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        const growing = new HeldBytes();
        let held: Buffer = Buffer.alloc(0);
        let model: Buffer = Buffer.alloc(0);
        const passedOn: { view: Buffer; copy: Buffer }[] = [];
        for (const s of steps) {
          if ('append' in s) {
            const chunk = Buffer.from(s.append);
            held = growing.append(held, chunk);
            model = Buffer.concat([model, chunk]);
          } else {
            const n = Math.min(s.drop, held.length);
            passedOn.push({ view: held.subarray(0, n), copy: Buffer.from(held.subarray(0, n)) });
            held = held.subarray(n);
            model = model.subarray(n);
          }
          expect(held.equals(model)).toBe(true);
        }
        for (const p of passedOn) expect(p.view.equals(p.copy)).toBe(true);
      }),
      { seed: SEED, numRuns: 1000 },
    );
  });

  it('copies a record arriving in n chunks about once, not n times', () => {
    const growing = new HeldBytes();
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    let held: Buffer = Buffer.alloc(1, 0x22);
    const stores = new Set<ArrayBufferLike>();
    for (let i = 0; i < 64; i++) {
      held = growing.append(held, chunk);
      stores.add(held.buffer);
    }
    expect(held.length).toBe(1 + 64 * 64 * 1024);
    // one allocation per doubling: log2(64) + 1, where a copy per chunk allocates 64
    expect(stores.size).toBeLessThanOrEqual(8);
  });
});
