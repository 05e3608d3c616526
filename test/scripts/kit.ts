import pino from 'pino';
import { expect } from 'vitest';
import { loadServiceConfig } from '../../src/config/index.js';
import { flushScriptLogs } from '../../src/scripts/logs.js';
import type { ServiceContext } from '../../src/store/service.js';
import { jsonLines, type TestService } from '../helpers.js';

/** Shared steps of the scripts tests. */

/** Creates an enabled script on a hook through the API; returns its ID. */
export async function addScript(
  s: TestService,
  hook: string,
  source: string,
  extra: Record<string, unknown> = {},
): Promise<string> {
  const r = await s.req({
    method: 'POST',
    url: '/scripts',
    payload: { Name: `${hook} script`, Hook: hook, Enabled: true, Source: source, ...extra },
  });
  expect(r.statusCode, r.body).toBe(201);
  return String(r.headers['x-id']);
}

/**
 * A ServiceContext over the test service's store and state (its ScriptLog queue, its caches), for
 * calling the feature's functions directly.
 */
export const ctxOf = (s: TestService): ServiceContext => ({
  store: s.store,
  db: s.db,
  state: s.state,
  logger: pino({ level: 'silent' }),
  config: loadServiceConfig({ env: {} }),
});

/** Every ScriptLog, after the queued ones are written. */
export async function scriptLogs(s: TestService): Promise<Record<string, unknown>[]> {
  await flushScriptLogs(ctxOf(s));
  const r = await s.req({ url: '/scriptlogs?order=Time' });
  expect(r.statusCode).toBe(200);
  return jsonLines(r.body).map((l) => l.Item as Record<string, unknown>);
}
