/** The sealed sign-in state (src/proxy/state.ts): only this proxy's, unaltered and unexpired, opens. */
import { generateKeyPairSync } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { STATE_TTL_S, StateSealer } from '../../src/proxy/state.js';

const key = () => generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;

describe('sign-in state', () => {
  const sealer = new StateSealer(key());

  it('opens what it sealed: the path when it fits, and whether it was a second attempt', () => {
    fc.assert(
      fc.property(fc.webPath(), fc.boolean(), (p, retried) => {
        const back = `/${p.replace(/^\/+/, '')}`;
        const state = sealer.seal(back, retried);
        expect(state).toMatch(/^[A-Za-z0-9_-]{16,128}$/);
        const opened = sealer.open(state);
        expect(opened?.retried).toBe(retried);
        expect(opened?.back).toBe(Buffer.byteLength(back) <= 70 ? back : undefined);
      }),
    );
  });

  it('opens nothing altered, nothing sealed with another key, nothing expired', () => {
    const other = new StateSealer(key());
    fc.assert(
      fc.property(fc.nat(), fc.integer({ min: 1, max: 255 }), (at, flip) => {
        const state = sealer.seal('/x', false);
        const raw = Buffer.from(state, 'base64url');
        const i = at % raw.length;
        raw[i] = (raw[i] as number) ^ flip;
        expect(sealer.open(raw.toString('base64url'))).toBeUndefined();
        expect(other.open(state)).toBeUndefined();
      }),
    );
    vi.useFakeTimers({ now: Date.now() });
    try {
      const state = sealer.seal('/x', false);
      vi.setSystemTime(Date.now() + (STATE_TTL_S + 2) * 1000);
      expect(sealer.open(state)).toBeUndefined();
    } finally {
      vi.useRealTimers();
    }
    expect(sealer.open('A'.repeat(24))).toBeUndefined();
    expect(sealer.open('')).toBeUndefined();
  });
});
