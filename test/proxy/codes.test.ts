import { describe, expect, it, vi } from 'vitest';
import { CODE_TTL_MS, issueCode, redeemCode } from '../../src/backchannel/codes.js';
import { openDb } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrations.js';
import type { ServiceContext } from '../../src/store/service.js';
import { backends, freshLocation } from '../helpers.js';

describe.each(backends())('proxy sign-in codes on %s', (backend) => {
  it('are redeemed once, by any instance, only for the App they were issued to, before they expire', async () => {
    const { location, cleanup } = await freshLocation(backend);
    // Two service instances sharing one database.
    const a = openDb(location);
    const b = openDb(location);
    try {
      await migrate(a);
      const ctxA = { db: a } as ServiceContext;
      const ctxB = { db: b } as ServiceContext;
      const code = await issueCode(ctxA, 'app1', 'session1');
      expect(await redeemCode(ctxB, 'app2', code)).toBeUndefined(); // another App: refused, and spent
      expect(await redeemCode(ctxB, 'app1', code)).toBeUndefined();

      const good = await issueCode(ctxA, 'app1', 'session1');
      const both = await Promise.all([redeemCode(ctxA, 'app1', good), redeemCode(ctxB, 'app1', good)]);
      expect(both.filter(Boolean)).toEqual(['session1']);

      const late = await issueCode(ctxA, 'app1', 'session2');
      vi.spyOn(Date, 'now').mockReturnValue(Date.now() + CODE_TTL_MS + 1);
      try {
        expect(await redeemCode(ctxB, 'app1', late)).toBeUndefined();
      } finally {
        vi.restoreAllMocks();
      }
      expect(await redeemCode(ctxB, 'app1', 'not-a-code')).toBeUndefined();
    } finally {
      await a.close();
      await b.close();
      await cleanup();
    }
  });
});
