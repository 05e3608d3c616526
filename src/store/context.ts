import type { Logger } from 'pino';
import type { ServiceConfig } from '../config/index.js';
import type { Db } from './db.js';
import type { ObjectStore } from './objects.js';
import type { ObjectWriter } from './writer.js';

/** What every part of the service is built from; passed to route registrars and authenticators. */
export interface ServiceContext {
  store: ObjectStore;
  db: Db;
  logger: Logger;
  config: ServiceConfig;
  /**
   * The one write path (src/writes/path.ts): every object write a caller asks for goes through it.
   * Set by the server's composition; absent only in tests that build a bare context.
   */
  writes?: ObjectWriter;
}

/** The write path of a service; a context built without one cannot write on a caller's behalf. */
export function writerOf(ctx: ServiceContext): ObjectWriter {
  if (!ctx.writes) throw new Error('this service context has no write path (src/writes/path.ts)');
  return ctx.writes;
}
