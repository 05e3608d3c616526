import { sql } from 'kysely';
import { Metric } from '../objects/metric.js';
import { objectTypes } from '../objects/registry.js';
import type { ObjectStore } from '../store/objects.js';
import { jobsOf, type ServiceContext } from '../store/service.js';
import { collectFigures } from './figures.js';

/** How often object counts are refreshed. */
export const METRICS_INTERVAL_MS = 60_000;

const metricId = (kind: string) => `objects.${kind.toLowerCase()}`;

/**
 * Keeps one Metric per object type, `objects.<type>`, holding how many objects of that type exist.
 * A metric is rewritten only when its value changes, so idle services add nothing to the change
 * log; several instances sharing a database converge on the same values.
 */
export async function collectObjectCounts(store: ObjectStore): Promise<void> {
  const rows = await sql<{
    type: string;
    n: number | string;
  }>`SELECT type, count(*) AS n FROM objects GROUP BY type`.execute(store.db.kysely);
  const counts = new Map(rows.rows.map((r) => [r.type, Number(r.n)]));
  for (const type of objectTypes) {
    if (type.kind === Metric.kind) continue;
    const value = counts.get(type.kind) ?? 0;
    await store.systemPut(Metric, metricId(type.kind), (doc) =>
      doc && doc.Value === value
        ? { doc }
        : {
            doc: {
              Name: metricId(type.kind),
              Description: `Number of ${type.kind} objects`,
              Value: value,
              Unit: 'objects',
              Time: new Date().toISOString(),
            },
          },
    );
  }
}

/** Runs the collector now and every `intervalMs`, among the service's background jobs (src/core/jobs.ts). */
export function scheduleMetrics(ctx: ServiceContext, intervalMs = METRICS_INTERVAL_MS): void {
  jobsOf(ctx).every(
    'metrics collection',
    intervalMs,
    async () => {
      await collectObjectCounts(ctx.store);
      await collectFigures(ctx);
    },
    { runAtStart: true },
  );
}
