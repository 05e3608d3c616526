import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attemptSucceeded, chargeAttempt, factorKey } from '../../src/auth/throttle.js';
import { ApiError } from '../../src/core/errors.js';
import { type Db, openDb } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrations.js';
import { backends, freshLocation } from '../helpers.js';

/**
 * Two instances race on the same counter, as when one code is presented at two instances at once:
 * the winner's correct answer deletes the counter while the loser is charging it. The loser must
 * be counted (and then refused by the code check, 403), never answered 503 "cannot be counted".
 */
describe.each(backends())('throttle counters under a race between instances (%s)', (backend) => {
  let a: Db;
  let b: Db;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    const loc = await freshLocation(backend);
    cleanup = loc.cleanup;
    a = openDb(loc.location);
    await migrate(a);
    b = openDb(loc.location);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await cleanup?.();
  });

  it('a charge racing a success that clears the counter is counted, never refused as unavailable', async () => {
    const unavailable: string[] = [];
    const outcome = async (p: Promise<unknown>) => {
      try {
        await p;
      } catch (e) {
        if (e instanceof ApiError && e.code === 'Service Unavailable') unavailable.push(e.message);
        else if (!(e instanceof ApiError && e.status === 429)) throw e;
      }
    };
    for (let round = 0; round < 150; round++) {
      const charge = factorKey(`user-${round % 3}`, 'code', undefined);
      await Promise.all([
        outcome(chargeAttempt({ db: a }, [charge]).then(() => attemptSucceeded({ db: a }, charge))),
        outcome(chargeAttempt({ db: b }, [charge])),
        outcome(chargeAttempt({ db: b }, [charge]).then(() => attemptSucceeded({ db: b }, charge))),
      ]);
    }
    expect(unavailable).toEqual([]);
  }, 120_000);
});
