import { randomBytes } from 'node:crypto';

/** What a request id looks like, ours or a client's: the only form echoed and logged. */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * New request ids for one server: a random prefix drawn once (72 bits), then a counter. As unique
 * across processes and restarts as random UUIDs in practice, and far cheaper: a UUID per request
 * cost about 4 µs of a GET's 65 µs here, most of it refilling Node's entropy buffer
 * (docs/benchmarks.md, "Request ids, the websocket plugin and request metrics").
 */
export function requestIdSource(): () => string {
  const prefix = randomBytes(9).toString('base64url');
  let next = 0;
  return () => `${prefix}.${(next++).toString(36)}`;
}
