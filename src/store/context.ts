import type { Logger } from 'pino';
import type { ServiceConfig } from '../config/index.js';
import type { Db } from './db.js';
import type { ObjectStore } from './objects.js';

/** What every part of the service is built from; passed to route registrars and authenticators. */
export interface ServiceContext {
  store: ObjectStore;
  db: Db;
  logger: Logger;
  config: ServiceConfig;
}
