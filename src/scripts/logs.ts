import type { FastifyInstance } from 'fastify';
import { ScriptLog } from '../objects/scriptlog.js';
import { TENANT_ID, Tenant } from '../objects/tenant.js';
import type { Doc } from '../schema/fields.js';
import { parseListQuery } from '../store/listquery.js';
import type { StoredObject } from '../store/objects.js';
import { jobsOf, perService, type ServiceContext, stateOf } from '../store/service.js';

/** The fields of a ScriptLog as the runner fills them in (src/objects/scriptlog.ts). */
export interface LogEntry {
  ScriptID: string;
  ScriptName: string;
  Hook: string;
  Test: string;
  Time: string;
  Input: string;
  Console: string[];
  Result: string;
  Error: string;
  DurationMs: number;
  LimitsHit: string[];
  Applied: string;
  Passed: boolean;
  Expected: string;
}

/**
 * ScriptLogs of hook runs are written after the run, off the request's path: a hook adds its
 * sandbox time to a request, not a database write. Queued logs are written every FLUSH_DELAY_MS,
 * up to WRITE_BATCH in one transaction. At most MAX_PENDING wait; past that the run that logs
 * waits for the queue to drain (backpressure), so no run goes unlogged and memory stays bounded.
 */
const MAX_PENDING = 1000;
const WRITE_BATCH = 100;
const FLUSH_DELAY_MS = 100;

interface Queue {
  items: LogEntry[];
  flushing: Promise<void> | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
}
/** The service's queue of ScriptLogs waiting to be written. */
const QUEUE = perService<Queue>('script log queue', () => ({
  items: [],
  flushing: undefined,
  timer: undefined,
}));

/** Writes one ScriptLog now; returns the stored object. */
export async function writeLog(ctx: ServiceContext, entry: LogEntry): Promise<StoredObject | undefined> {
  const [obj] = await ctx.store.systemInsertMany(ScriptLog, [entry as unknown as Doc]);
  return obj;
}

const queueOf = (ctx: ServiceContext): Queue => stateOf(ctx, QUEUE);

function flush(ctx: ServiceContext, q: Queue): Promise<void> {
  if (q.timer) clearTimeout(q.timer);
  q.timer = undefined;
  q.flushing ??= (async () => {
    try {
      while (q.items.length > 0) {
        const batch = q.items.splice(0, WRITE_BATCH);
        try {
          await ctx.store.systemInsertMany(ScriptLog, batch as unknown as Doc[]);
        } catch (err) {
          ctx.logger.warn({ err, count: batch.length }, 'could not write ScriptLogs');
        }
      }
    } finally {
      q.flushing = undefined;
    }
  })();
  return q.flushing;
}

/** Queues a ScriptLog of a hook run; resolves at once unless the queue is full. */
export function recordRun(ctx: ServiceContext, entry: LogEntry): Promise<void> {
  const q = queueOf(ctx);
  q.items.push(entry);
  if (q.items.length > MAX_PENDING) return flush(ctx, q);
  if (!q.timer && !q.flushing) {
    q.timer = setTimeout(() => void flush(ctx, q), FLUSH_DELAY_MS);
    q.timer.unref();
  } else if (q.flushing && !q.timer) {
    // Written after the flush under way ends.
    void q.flushing.then(() => {
      if (q.items.length > 0 && !q.timer && !q.flushing) {
        q.timer = setTimeout(() => void flush(ctx, q), FLUSH_DELAY_MS);
        q.timer.unref();
      }
    });
  }
  return Promise.resolve();
}

/** Resolves when every queued ScriptLog is written (tests, shutdown). */
export async function flushScriptLogs(ctx: ServiceContext): Promise<void> {
  const q = queueOf(ctx);
  while (q.items.length > 0 || q.flushing) await flush(ctx, q);
}

/** Logs deleted per batch, and batches per pass: pruning never holds the database for long. */
export const PRUNE_BATCH = 100;
const PRUNE_BATCHES_PER_PASS = 20;
export const PRUNE_INTERVAL_MS = 60_000;

/**
 * Deletes ScriptLogs older than the Tenant's ScriptLogRetentionSeconds, oldest first, in batches
 * of PRUNE_BATCH (one write each, so the event stream reports each deletion). Returns how many.
 */
export async function pruneScriptLogs(ctx: ServiceContext, now = Date.now()): Promise<number> {
  const tenant = (await ctx.store.get(Tenant, TENANT_ID))?.doc ?? {};
  const keep =
    typeof tenant.ScriptLogRetentionSeconds === 'number' ? tenant.ScriptLogRetentionSeconds : 7 * 86400;
  const cutoff = new Date(now - keep * 1000).toISOString();
  let removed = 0;
  for (let b = 0; b < PRUNE_BATCHES_PER_PASS; b++) {
    const page = await ctx.store.list(
      ScriptLog,
      parseListQuery(ScriptLog, {
        filter: `Time < ${JSON.stringify(cutoff)}`,
        order: ['Time', 'ID'],
        limit: String(PRUNE_BATCH),
      }),
    );
    // Read the batch whole before writing: on SQLite a write waits for the one connection.
    const ids: string[] = [];
    for await (const chunk of page.chunks)
      for (const line of chunk.split('\n')) if (line !== '') ids.push(String((JSON.parse(line) as Doc).ID));
    for (const id of ids) {
      await ctx.store.systemPut(ScriptLog, id, () => null);
      removed++;
    }
    if (ids.length < PRUNE_BATCH) break;
    await new Promise((r) => setImmediate(r));
  }
  return removed;
}

/**
 * Prunes every PRUNE_INTERVAL_MS among the service's background jobs (src/core/jobs.ts); the
 * queued logs are written when the server closes.
 */
export function scheduleScriptLogPruning(app: FastifyInstance, ctx: ServiceContext) {
  jobsOf(ctx).every('script log pruning', PRUNE_INTERVAL_MS, async () => {
    const n = await pruneScriptLogs(ctx);
    if (n > 0) ctx.logger.info({ removed: n }, 'script log pruning');
  });
  app.addHook('onClose', async () => {
    await flushScriptLogs(ctx).catch(() => undefined);
  });
}
