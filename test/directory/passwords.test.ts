import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { generatePassword, PASSWORD_ALPHABET, PASSWORD_LENGTH } from '../../src/directory/passwords.js';

describe('the initial-password policy', () => {
  it('makes 20 unambiguous letters and digits with every class, never the same twice', () => {
    const seen = new Set<string>();
    fc.assert(
      fc.property(fc.constant(null), () => {
        const p = generatePassword();
        expect(p).toHaveLength(PASSWORD_LENGTH);
        expect(p).toMatch(/[a-z]/);
        expect(p).toMatch(/[A-Z]/);
        expect(p).toMatch(/[0-9]/);
        expect(p).not.toMatch(/[0O1lIio]/);
        for (const ch of p) expect(PASSWORD_ALPHABET).toContain(ch);
        expect(seen.has(p)).toBe(false);
        seen.add(p);
      }),
      { numRuns: 2000 },
    );
    // Every character of the alphabet turns up (the draw covers all of it).
    const all = new Set([...seen].join(''));
    expect(all.size).toBe(PASSWORD_ALPHABET.length);
    expect(PASSWORD_ALPHABET.length).toBe(55);
  });
});
