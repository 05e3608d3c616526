/**
 * Readiness for load balancers (GET /.gatehouse/health): 200 while the service answers and has
 * not refused this proxy's token, else 503 "not ready". The service's /healthz is asked at most
 * once per PROBE_MS whatever the number of health checks; concurrent checks share one probe.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { limitUnusedBody } from '../core/unusedbody.js';
import type { AuthBackend } from './backend.js';

/** A probe's answer is reused this long. */
const PROBE_MS = 2_000;

export class Readiness {
  private checkedAt = 0;
  private problem: string | undefined = 'not checked yet';
  private pending: Promise<void> | undefined;

  constructor(
    private readonly backend: AuthBackend,
    /** Set when the service refused the proxy's token. */
    private readonly tokenProblem: () => string | undefined,
  ) {}

  /** Why the proxy is not ready, or undefined when it is. */
  async check(): Promise<string | undefined> {
    const token = this.tokenProblem();
    if (token) return token;
    if (!this.backend.probe) return undefined;
    if (Date.now() - this.checkedAt > PROBE_MS) {
      this.pending ??= this.backend
        .probe()
        .then(
          () => {
            this.problem = undefined;
          },
          (e: unknown) => {
            this.problem = `the identity service cannot be reached (${(e as Error).message})`;
          },
        )
        .finally(() => {
          this.checkedAt = Date.now();
          this.pending = undefined;
        });
      await this.pending;
    }
    return this.problem;
  }

  async answer(req: IncomingMessage, res: ServerResponse) {
    limitUnusedBody(req, res);
    const problem = await this.check();
    const body = JSON.stringify(problem ? { Ready: false, Reason: problem } : { Ready: true });
    res.writeHead(problem ? 503 : 200, {
      'content-type': 'application/json',
      'cache-control': 'no-store',
      'content-length': Buffer.byteLength(body),
    });
    res.end(req.method === 'HEAD' ? undefined : body);
  }
}
