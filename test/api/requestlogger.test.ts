import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { requestLogger } from '../../src/api/requestlogger.js';

/** A pino logger at `level` writing its lines, without the time (it differs between two loggers). */
function capture(level: string) {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level, redact: ['*.password'] },
    {
      write: (line: string) => {
        const { time: _time, ...rest } = JSON.parse(line);
        lines.push(rest);
      },
    },
  );
  return { logger, lines };
}

describe("a request's logger (src/api/requestlogger.ts)", () => {
  it("writes the lines pino's child writes, with the request id, and only at the written levels", () => {
    const lazy = capture('warn');
    const eager = capture('warn');
    for (const { logger } of [lazy, eager]) {
      const log =
        logger === lazy.logger
          ? requestLogger(logger, { reqId: 'r1' }, {})
          : logger.child({ reqId: 'r1' }, {});
      log.info({ a: 1 }, 'dropped');
      log.debug('dropped');
      log.warn({ password: 'x', b: 2 }, 'kept %s', 'too');
      log.error(new Error('boom'), 'failed');
      log.child({ step: 'two' }).warn('from a child');
      expect(log.level).toBe('warn');
    }
    expect(lazy.lines).toEqual(eager.lines);
    expect(lazy.lines.map((l) => [l.reqId, l.msg])).toEqual([
      ['r1', 'kept too'],
      ['r1', 'failed'],
      ['r1', 'from a child'],
    ]);
  });

  it('answers which levels it writes, and follows a level set on it', () => {
    const { logger, lines } = capture('warn');
    const log = requestLogger(logger, { reqId: 'r2' }, {}) as unknown as pino.Logger;
    expect(log.isLevelEnabled('info')).toBe(false);
    expect(log.isLevelEnabled('warn')).toBe(true);
    log.level = 'debug';
    log.debug('now written');
    expect(logger.level).toBe('warn');
    expect(lines).toEqual([expect.objectContaining({ reqId: 'r2', level: 20, msg: 'now written' })]);
  });

  it("is pino's child at once for a route with its own level", () => {
    const { logger, lines } = capture('warn');
    const log = requestLogger(logger, { reqId: 'r3' }, { level: 'info' });
    log.info('written');
    expect(lines).toEqual([expect.objectContaining({ reqId: 'r3', msg: 'written' })]);
  });
});
