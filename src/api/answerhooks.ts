import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** Runs before an answer leaves (it may set headers); a promise makes the answer wait for it. */
export type BeforeSend = (req: FastifyRequest, reply: FastifyReply) => void | Promise<void>;
/** Runs once an answer has been sent. */
export type AfterResponse = (req: FastifyRequest, reply: FastifyReply) => void;

/**
 * What features do with every answer, run from one onSend and one onResponse hook.
 *
 * Why not a Fastify hook per feature: every hook runs for every request through Fastify's hook
 * runner, whatever it does. A build without two of them (for the measurement only) spent 2 to 4 µs
 * less per GET /users/:id; five merged into these two measured about 1 µs less, at the edge of
 * this VM's noise (docs/benchmarks.md, "One hook for every answer"). Each feature still adds its
 * own function, where it registers its routes; they run in the order they were added.
 */
export class AnswerHooks {
  readonly #beforeSend: BeforeSend[] = [];
  readonly #afterResponse: AfterResponse[] = [];

  constructor(app: FastifyInstance) {
    const before = this.#beforeSend;
    const after = this.#afterResponse;
    app.addHook('onSend', (req, reply, payload, done) => {
      // From function `from` on; a promise resumes the walk once it settles.
      const walk = (from: number): void => {
        for (let i = from; i < before.length; i++) {
          let waiting: void | Promise<void>;
          try {
            waiting = (before[i] as BeforeSend)(req, reply);
          } catch (e) {
            done(e as Error);
            return;
          }
          if (waiting) {
            waiting.then(
              () => walk(i + 1),
              (e: Error) => done(e),
            );
            return;
          }
        }
        done(null, payload);
      };
      walk(0);
    });
    app.addHook('onResponse', (req, reply, done) => {
      for (const fn of after) fn(req, reply);
      done();
    });
  }

  beforeSend(fn: BeforeSend) {
    this.#beforeSend.push(fn);
  }

  afterResponse(fn: AfterResponse) {
    this.#afterResponse.push(fn);
  }
}
