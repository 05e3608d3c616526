import { expect } from 'vitest';
import { CONNECT_TIMEOUT_MS } from '../../src/store/db.js';
import { DATABASE_RETRY_AFTER_S } from '../../src/store/unavailable.js';
import type { Served } from '../cli/run.js';
import { EventClient } from '../events/client.js';

// The load-and-check steps of the database fault tests (outage.test.ts, netcut.test.ts).

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Outcome {
  status: number | 'reset';
  /** How long the answer took. */
  ms: number;
  retryAfter?: string | null;
  code?: string | null;
  id?: string | null;
}

export async function createUser(url: string, key: string, i: number): Promise<Outcome> {
  const t0 = Date.now();
  try {
    const r = await fetch(`${url}/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ Email: `w${i}@example.com` }),
    });
    await r.arrayBuffer();
    return {
      status: r.status,
      ms: Date.now() - t0,
      retryAfter: r.headers.get('retry-after'),
      code: r.headers.get('x-error-code'),
      id: r.headers.get('x-id'),
    };
  } catch {
    return { status: 'reset', ms: Date.now() - t0 };
  }
}

/**
 * Eight writers create users until `fault` has run and a second more has passed; a subscriber
 * opened before them records the event stream. Returns every answer.
 */
export async function writeThrough(
  url: string,
  key: string,
  fault: () => Promise<void>,
  /** How long writing goes on after the fault. */
  afterMs = 1_000,
) {
  const subscriber = await EventClient.open(url, key);
  subscriber.send({ Kind: 'User' });
  await subscriber.caughtUp('User');
  const outcomes: Outcome[] = [];
  let n = 0;
  let writing = true;
  const writers = Array.from({ length: 8 }, async () => {
    while (writing) outcomes.push(await createUser(url, key, n++));
  });
  await sleep(300);
  await fault();
  await sleep(afterMs);
  writing = false;
  await Promise.all(writers);
  return { outcomes, subscriber };
}

/**
 * What a fault under write load may and may not do: only 201 or 503 with Retry-After (never a
 * reset or a 500), each answer within the connect timeout, the faults felt, writing going on after
 * them, the process up, every acknowledged write stored, on the old subscriber's stream exactly
 * once and in a new subscriber's snapshot.
 */
export async function checkAfterFault(
  s: Served,
  key: string,
  outcomes: Outcome[],
  subscriber: EventClient,
  /** The longest an answer may take. */
  boundMs = CONNECT_TIMEOUT_MS + 2_000,
  /**
   * Where a write may be held across the fault and then committed (a network cut: the statement's
   * bytes wait and arrive once the link heals, and the write is answered with that real outcome,
   * 201), an answer that took this long also shows the fault was felt. Unset: only a 503 does.
   */
  heldMs?: number,
) {
  expect(s.proc.exitCode, s.stdout()).toBeNull();
  const bad = outcomes.filter((o) => o.status !== 201 && o.status !== 503);
  expect(bad, JSON.stringify(bad.slice(0, 5))).toEqual([]);
  const refused = outcomes.filter((o) => o.status === 503);
  for (const o of refused) {
    expect(o.retryAfter).toBe(String(DATABASE_RETRY_AFTER_S));
    expect(o.code).toBe('Service Unavailable');
  }
  expect(Math.max(...outcomes.map((o) => o.ms))).toBeLessThan(boundMs);
  const held = heldMs === undefined ? [] : outcomes.filter((o) => o.status === 201 && o.ms >= heldMs);
  expect(refused.length + held.length).toBeGreaterThan(0);
  expect(outcomes.slice(-8).some((o) => o.status === 201)).toBe(true);
  const written = outcomes.filter((o) => o.status === 201).map((o) => o.id as string);
  for (const id of written) {
    const r = await fetch(`${s.url}/users/${id}`, { headers: { authorization: `Bearer ${key}` } });
    expect(r.status, id).toBe(200);
  }
  expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
  const frames = (c: EventClient, id: string) =>
    c.frames.filter((f) => f.Kind === 'User' && f.ID === id).length;
  await subscriber.until(
    (c) => written.every((id) => frames(c, id) >= 1),
    10_000,
    'every write on the old stream',
  );
  expect(written.filter((id) => frames(subscriber, id) !== 1)).toEqual([]);
  const fresh = await EventClient.open(s.url, key);
  fresh.send({ Kind: 'User' });
  const snapshot = new Set((await fresh.caughtUp('User')).map((f) => f.ID));
  expect(written.filter((id) => !snapshot.has(id))).toEqual([]);
  subscriber.close();
  fresh.close();
}
