/**
 * The world of the proxy regression suites: the service, a proxy in front of a recording
 * upstream (which records what its own parser read), and the checks every attack
 * ends with. `/public/` is open to anonymous requests, as is the VirtualHost open.test; everything
 * else requires identity.
 */
import { afterAll, beforeAll, expect } from 'vitest';
import type { RunningProxy } from '../../src/proxy/run.js';
import type { Backend } from '../helpers.js';
import { startWorld, type World } from '../proxy/harness.js';
import { finalResponses, type Recorded, type Recorder, rawExchange, startRecorder } from './raw.js';

/** The request an attacker hides: a protected path with a forged identity. */
export const HIDDEN =
  'GET /admin/smuggled HTTP/1.1\r\nHost: h\r\nX-Service-User: forged\r\nX-Service-Email: evil@example.com\r\n' +
  'X-Remote-User: evil@example.com\r\n\r\n';
export const CHUNKED_ABC = '3\r\nabc\r\n0\r\n\r\n';

export interface Attack {
  raw: string;
  /** Status codes of the final responses, in order. */
  statuses: number[];
  /** What the upstream read meanwhile. */
  seen: Recorded[];
}

export interface ProxyWorld {
  w: World;
  p: RunningProxy;
  up: Recorder;
  port: number;
  /** host:port of the proxy, as a client's Host line names it. */
  host: string;
  /**
   * Sends the bytes; waits for `responses` final responses, the connection's end, or `idleMs` of
   * silence (the proxy waiting for body bytes that never come).
   */
  attack(text: string, responses?: number, idleMs?: number): Promise<Attack>;
}

/** Registers the hooks that start and stop the world; its fields are set before the first test. */
export function useProxyWorld(backend: Backend): ProxyWorld {
  const t = {} as ProxyWorld;
  beforeAll(async () => {
    t.w = await startWorld(backend);
    t.up = await startRecorder();
    // A VirtualHost open to anonymous requests, next to the default host where identity is required.
    const vh = await t.w.s.req({
      method: 'POST',
      url: '/virtualhosts/open.test',
      payload: { AppID: t.w.appId, Auth: 'none' },
    });
    expect(vh.statusCode).toBe(201);
    t.p = await t.w.proxy({ overrides: ['path_/public/_auth=none'], env: { SVC_PROXY_UPSTREAM: t.up.url } });
    t.port = Number(new URL(t.p.url).port);
    t.host = `127.0.0.1:${t.port}`;
  });
  afterAll(async () => {
    await t.w?.close();
    await t.up?.close();
  });
  t.attack = async (text, responses = 1, idleMs = 2000) => {
    // A request of the previous attack may still be on its way upstream: not this attack's.
    await t.up.quiet();
    const from = t.up.seen.length;
    const raw = await rawExchange(t.port, text, { responses, idleMs });
    return { raw, statuses: finalResponses(raw).map((r) => r.status), seen: await t.up.since(from) };
  };
  return t;
}

/** Nothing hidden reached the upstream as a request, and nothing forged rode along on any. */
export function nothingHiddenOrForged(seen: Recorded[]) {
  for (const r of seen) {
    expect(r.url).not.toContain('smuggled');
    const lines = [...r.rawHeaders, ...r.rawTrailers].join('\n').toLowerCase();
    expect(lines).not.toContain('forged');
    expect(lines).not.toContain('evil@example.com');
  }
}

/**
 * What must hold whatever the proxy decided: nothing hidden or forged, at most `max` requests
 * upstream, and each with exactly the identity the proxy established (`userId`, or none).
 */
export function upstreamIsClean(seen: Recorded[], max = 1, userId?: string) {
  expect(seen.length).toBeLessThanOrEqual(max);
  nothingHiddenOrForged(seen);
  for (const r of seen) expect(r.headers['x-service-user']).toBe(userId);
}

/** Refused: 400 and no complete request upstream (a body error may cut off one already started). */
export function refused(out: Attack) {
  expect(out.statuses).toEqual([400]);
  expect(out.seen.filter((r) => r.complete)).toEqual([]);
  upstreamIsClean(out.seen);
}

/** Forwarded once, with exactly this body (as the proxy framed it); a hidden request after it answered on its own. */
export function forwardedOnce(out: Attack, body: string) {
  expect(out.statuses[0]).toBe(200);
  for (const s of out.statuses.slice(1)) expect([400, 401]).toContain(s);
  expect(out.seen).toHaveLength(1);
  expect(out.seen[0]?.complete).toBe(true);
  expect(out.seen[0]?.body.toString('latin1')).toBe(body);
  upstreamIsClean(out.seen);
}
