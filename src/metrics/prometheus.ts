import { Counter, Gauge, Registry } from 'prom-client';
import { factors } from '../auth/factors/index.js';
import type { ServiceContext } from '../store/service.js';
import { databaseFigures, signinCountsOf } from './figures.js';
import { RequestMetrics } from './requests.js';

/** The sign-in steps whose answers count as sign-ins: POST /auth/<factor>. */
const SIGNIN_ROUTES = new Map(factors.map((f) => [`/auth/${f.name}`, f.name]));

/** Prometheus name of a database figure: users.active.day → gatehouse_users_active_day. */
export const promName = (figureId: string) => `gatehouse_${figureId.replace(/[^a-zA-Z0-9]/g, '_')}`;

export interface ServiceMetrics {
  registry: Registry;
  /** Records one answered request (route pattern, never the raw path: bounded label values). */
  observe(method: string, route: string | undefined, status: number, seconds: number): void;
}

/**
 * The service's Prometheus registry (one per service instance, not prom-client's global one): request
 * counts and latencies by route, sign-in answers per factor, and the database figures of
 * figures.ts read at scrape time, plus object counts. docs/directory.md lists every name.
 */
export function serviceMetrics(ctx: Pick<ServiceContext, 'store' | 'db' | 'state'>): ServiceMetrics {
  const registry = new Registry();
  const requests = new RequestMetrics(registry);
  const signins = new Counter({
    name: 'gatehouse_signins_total',
    help: 'Sign-in steps answered, by factor and result (success, failure, throttled)',
    labelNames: ['factor', 'result'] as const,
    registers: [registry],
  });
  const figureGauges: Gauge[] = [];
  // One scrape reads the figures once; every gauge's collect() shares that read.
  let reading: Promise<Map<string, number>> | undefined;
  const figures = () => {
    reading ??= databaseFigures(ctx).then((list) => new Map(list.map((x) => [x.id, x.value])));
    return reading;
  };
  const FIGURE_HELP: Record<string, string> = {
    'users.active.day': 'Users with a session active since 00:00 UTC today',
    'approvals.pending.memberships': 'Membership requests waiting for an approver',
    'approvals.pending.accountchanges': 'Account changes waiting for approval',
    'approvals.pending.accountchangeplans': 'Account change plans waiting for approval',
    'accountchanges.approved': 'Account changes waiting for an agent',
    'accountchanges.in_progress': 'Account changes held by an agent',
    'accountchanges.failed': 'Account changes that failed',
    'remoteagents.stale': 'Agents that stopped reporting',
  };
  for (const [id, help] of Object.entries(FIGURE_HELP)) {
    figureGauges.push(
      new Gauge({
        name: promName(id),
        help,
        registers: [registry],
        async collect() {
          this.set((await figures()).get(id) ?? 0);
        },
      }),
    );
  }
  const originalMetrics = registry.metrics.bind(registry);
  registry.metrics = async () => {
    reading = undefined;
    try {
      return await originalMetrics();
    } finally {
      reading = undefined;
    }
  };
  const counts = signinCountsOf(ctx);
  return {
    registry,
    observe(method, route, status, seconds) {
      const r = route ?? '(no route)';
      requests.observe(method, r, status, seconds);
      const factor = method === 'POST' ? SIGNIN_ROUTES.get(r) : undefined;
      if (factor) {
        const result =
          status < 300 ? 'success' : status === 429 ? 'throttled' : status === 403 ? 'failure' : undefined;
        if (result) {
          signins.inc({ factor, result });
          counts.add(factor, result);
        }
      }
    },
  };
}
