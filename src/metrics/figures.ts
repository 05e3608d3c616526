import { sql } from 'kysely';
import { authDb } from '../auth/session/db.js';
import { markStaleAgents } from '../directory/agents.js';
import { nowStamp } from '../groups/lifecycle.js';
import { Metric } from '../objects/metric.js';
import type { ObjectStore } from '../store/objects.js';
import { perService, type ServiceContext, stateOf } from '../store/service.js';

/** One figure of the directory and sign-in metrics (docs/directory.md, "Metrics"). */
export interface Figure {
  id: string;
  description: string;
  value: number;
  unit: string;
}

const countWhere = async (store: ObjectStore, type: string, field: string, value: string) => {
  const d = store.db.dialect;
  const expr = d === 'sqlite' ? sql.raw(`json_extract(data, '$.${field}')`) : sql.raw(`(doc->>'${field}')`);
  const r = await sql<{
    n: number | string;
  }>`SELECT count(*) AS n FROM objects WHERE type = ${type} AND ${expr} = ${value}`.execute(store.db.kysely);
  return Number(r.rows[0]?.n ?? 0);
};

/** Start of the current UTC day, in ms. */
export const dayStart = (now = Date.now()) => now - (now % 86_400_000);

/**
 * The figures read from the database (the same on every instance): users active today (a session
 * of theirs seen since 00:00 UTC), pending approvals (membership requests, planned account changes,
 * proposed plans), account changes waiting for or held by an agent, stale agents.
 */
export async function databaseFigures(
  ctx: Pick<ServiceContext, 'store' | 'db'>,
  now = Date.now(),
): Promise<Figure[]> {
  const { store } = ctx;
  const active = await authDb(ctx)
    .selectFrom('sessions')
    .select((eb) => eb.fn.count<number | string>('user_id').distinct().as('n'))
    .where('user_id', '!=', '')
    .where('last_seen', '>=', dayStart(now))
    .executeTakeFirst();
  const f = (id: string, description: string, value: number, unit: string): Figure => ({
    id,
    description,
    value,
    unit,
  });
  return [
    f(
      'users.active.day',
      'Users with a session active since 00:00 UTC today',
      Number(active?.n ?? 0),
      'users',
    ),
    f(
      'approvals.pending.memberships',
      'Membership requests waiting for an approver',
      await countWhere(store, 'Membership', 'State', 'requested'),
      'requests',
    ),
    f(
      'approvals.pending.accountchanges',
      'Account changes waiting for approval',
      await countWhere(store, 'AccountChange', 'State', 'planned'),
      'changes',
    ),
    f(
      'approvals.pending.accountchangeplans',
      'Account change plans waiting for approval',
      await countWhere(store, 'AccountChangePlan', 'State', 'proposed'),
      'plans',
    ),
    f(
      'accountchanges.approved',
      'Account changes waiting for an agent',
      await countWhere(store, 'AccountChange', 'State', 'approved'),
      'changes',
    ),
    f(
      'accountchanges.in_progress',
      'Account changes held by an agent',
      await countWhere(store, 'AccountChange', 'State', 'in_progress'),
      'changes',
    ),
    f(
      'accountchanges.failed',
      'Account changes that failed and wait for a retry or cancel',
      await countWhere(store, 'AccountChange', 'State', 'failed'),
      'changes',
    ),
    f(
      'remoteagents.stale',
      'Agents that stopped reporting',
      await countWhere(store, 'RemoteAgent', 'Health', 'stale'),
      'agents',
    ),
  ];
}

/**
 * Sign-ins and failures per factor, counted in memory by each instance and added to the shared
 * Metric objects (signins.<factor>.<success|failure|throttled>) at every collection, so the objects
 * hold the total of all instances.
 */
export class SigninCounts {
  private pending = new Map<string, number>();

  add(factor: string, result: 'success' | 'failure' | 'throttled') {
    const id = `signins.${factor}.${result}`;
    this.pending.set(id, (this.pending.get(id) ?? 0) + 1);
  }

  async flush(store: ObjectStore): Promise<void> {
    const batch = this.pending;
    this.pending = new Map();
    for (const [id, n] of batch) {
      const [, factor, result] = id.split('.');
      await store.systemPut(Metric, id, (doc) => ({
        doc: {
          Name: id,
          Description: `Sign-in steps of factor ${factor} answered ${result}`,
          Value: Number(doc?.Value ?? 0) + n,
          Unit: 'attempts',
          Time: nowStamp(),
        },
      }));
    }
  }
}

/** The service's sign-in counts not yet written (src/store/service.ts: one per service). */
const SIGNIN_COUNTS = perService<SigninCounts, SigninCountsOwner>('sign-in counts', () => new SigninCounts());
type SigninCountsOwner = Pick<ServiceContext, 'state'>;
export const signinCountsOf = (ctx: SigninCountsOwner): SigninCounts => stateOf(ctx, SIGNIN_COUNTS);

/** Writes the database figures and the sign-in counts as Metric objects (only values that changed). */
export async function collectFigures(
  ctx: Pick<ServiceContext, 'store' | 'db' | 'state'>,
  now = Date.now(),
): Promise<void> {
  await markStaleAgents(ctx.store, now);
  for (const fig of await databaseFigures(ctx, now)) {
    await ctx.store.systemPut(Metric, fig.id, (doc) =>
      doc && doc.Value === fig.value
        ? { doc }
        : {
            doc: {
              Name: fig.id,
              Description: fig.description,
              Value: fig.value,
              Unit: fig.unit,
              Time: nowStamp(now),
            },
          },
    );
  }
  await signinCountsOf(ctx).flush(ctx.store);
}
