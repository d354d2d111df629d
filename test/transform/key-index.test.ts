import { describe, expect, it } from 'vitest';
import { KeyIndex } from '../../src/transform/key-index.js';

describe('KeyIndex', () => {
  it('keeps a value per key through growth, and tells unknown keys apart', () => {
    const idx = new KeyIndex(4);
    const n = 200_000;
    for (let i = 0; i < n; i++) idx.set(`MRN-${String(i).padStart(7, '0')}`, i + 2);
    expect(idx.size).toBe(n);
    for (let i = 0; i < n; i += 997) expect(idx.get(`MRN-${String(i).padStart(7, '0')}`)).toBe(i + 2);
    expect(idx.get('MRN-9999999')).toBeUndefined();
    expect(idx.has('')).toBe(false);
    // keys that differ only in order or case are different keys
    idx.set('ab', 0);
    expect(idx.get('ba')).toBeUndefined();
    expect(idx.get('AB')).toBeUndefined();
    expect(idx.get('ab')).toBe(0);
  });

  it('replaces the value of a known key without growing', () => {
    const idx = new KeyIndex();
    idx.set('x', 1);
    idx.set('x', 5);
    expect([idx.size, idx.get('x')]).toEqual([1, 5]);
    expect(() => idx.set('y', -1)).toThrow(RangeError);
  });
});
