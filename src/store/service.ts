import type { Logger } from 'pino';
import type { ServiceConfig } from '../config/index.js';
import type { Jobs } from '../core/jobs.js';
import type { Db } from './db.js';
import type { ObjectStore } from './objects.js';
import type { ObjectWriter } from './writer.js';

/**
 * The service object: what every part of the service is built from; passed to route registrars
 * and authenticators. It owns everything that lives as long as the service: its caches, queues
 * and event buses (`state`, one value per `perService` key), and its background jobs (`jobs`).
 * Nothing of one service is kept at module level, so two services in one process (as in tests)
 * share nothing (docs/architecture.md, "Module state").
 */
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
  /**
   * The service's background jobs (src/core/jobs.ts): started when the server is ready, stopped
   * when it closes. Set by the server's composition (src/api/server.ts).
   */
  jobs?: Jobs;
  /** The service's own state (see `perService`); made on first use when a context has none. */
  state?: ServiceState;
}

/**
 * A kind of per-service state: a cache, a queue, an event bus. Declared once, at module level,
 * by the feature it belongs to (the key is a constant; the value lives in each service's
 * `state`), and made on the service's first use by `make`.
 */
export interface PerService<T, C = ServiceContext> {
  readonly name: string;
  readonly make: (ctx: C) => T;
}

export const perService = <T, C = ServiceContext>(name: string, make: (ctx: C) => T): PerService<T, C> => ({
  name,
  make,
});

/** One service's values of its `perService` keys. */
export class ServiceState {
  private readonly values = new Map<PerService<unknown, never>, unknown>();

  get<T, C>(key: PerService<T, C>, ctx: C): T {
    if (this.values.has(key)) return this.values.get(key) as T;
    const value = key.make(ctx);
    this.values.set(key, value);
    return value;
  }

  /** Gives the service its own value of `key` (the composition root's choice), before first use. */
  set<T, C>(key: PerService<T, C>, value: T): void {
    if (this.values.has(key))
      throw new Error(`${key.name} is in use already: set it before the service starts`);
    this.values.set(key, value);
  }

  /** The names of the state made so far (diagnostics, tests). */
  get names(): string[] {
    return [...this.values.keys()].map((k) => k.name);
  }
}

/**
 * The service's value of `key`. A context built without state (a test's bare context) gets its
 * own on first use.
 */
export function stateOf<T, C extends { state?: ServiceState }>(ctx: C, key: PerService<T, C>): T {
  ctx.state ??= new ServiceState();
  return ctx.state.get(key, ctx);
}

/** The write path of a service; a context built without one cannot write on a caller's behalf. */
export function writerOf(ctx: ServiceContext): ObjectWriter {
  if (!ctx.writes) throw new Error('this service context has no write path (src/writes/path.ts)');
  return ctx.writes;
}

/** The background jobs of a service; a bare context (tests) has none to add to. */
export function jobsOf(ctx: ServiceContext): Jobs {
  if (!ctx.jobs) throw new Error('this service context has no background jobs (src/core/jobs.ts)');
  return ctx.jobs;
}
