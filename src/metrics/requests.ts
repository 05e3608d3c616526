import { Counter, Histogram, type Registry } from 'prom-client';

const LATENCY = 'gatehouse_http_request_duration_seconds';
const LATENCY_HELP = 'Time to answer an HTTP request, by method and route pattern';

/** Upper bounds of the latency histogram's buckets, in seconds. */
export const LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5] as const;

interface CountSeries {
  labels: { method: string; route: string; status: string };
  value: number;
}

interface LatencySeries {
  labels: { method: string; route: string };
  /** Observations per bucket (not cumulative); the last slot is above every bound. */
  buckets: Float64Array;
  sum: number;
  count: number;
}

/**
 * Request counts by method, route pattern and status, and latencies by method and route pattern.
 *
 * Why not prom-client's own Counter and Histogram: they hash their label object on every
 * observation (sorting its keys), which cost about 5 µs of a GET's 60 µs here
 * (docs/benchmarks.md, "Request ids, the websocket plugin and request metrics"). Here a request
 * finds its series through maps keyed by the values themselves. The exposition is still
 * prom-client's: the two metrics are its classes, with get() answering from these series in the
 * shape prom-client's own get() gives, series in the order they first appeared
 * (test/api/requestmetrics.test.ts compares the text with prom-client's, observation for
 * observation).
 */
export class RequestMetrics {
  private readonly counts = new Map<string, Map<string, Map<number, CountSeries>>>();
  private readonly countOrder: CountSeries[] = [];
  private readonly latencies = new Map<string, Map<string, LatencySeries>>();
  private readonly latencyOrder: LatencySeries[] = [];

  constructor(registry: Registry) {
    new RequestCounter(registry, () => this.countOrder);
    new LatencyHistogram(registry, () => this.latencyOrder);
  }

  /** One answered request: the route pattern (bounded values), never the raw path. */
  observe(method: string, route: string, status: number, seconds: number) {
    const byStatus = inner(inner(this.counts, route), method);
    let count = byStatus.get(status);
    if (!count) {
      count = { labels: { method, route, status: String(status) }, value: 0 };
      byStatus.set(status, count);
      this.countOrder.push(count);
    }
    count.value += 1;
    // prom-client refuses such a value by throwing; a request's elapsed time never is one.
    if (!Number.isFinite(seconds)) return;

    const latencyByMethod = inner(this.latencies, route);
    let latency = latencyByMethod.get(method);
    if (!latency) {
      latency = {
        labels: { method, route },
        buckets: new Float64Array(LATENCY_BUCKETS.length + 1),
        sum: 0,
        count: 0,
      };
      latencyByMethod.set(method, latency);
      this.latencyOrder.push(latency);
    }
    let bucket = 0;
    while (bucket < LATENCY_BUCKETS.length && !(seconds <= (LATENCY_BUCKETS[bucket] as number))) bucket++;
    latency.buckets[bucket] = (latency.buckets[bucket] ?? 0) + 1;
    latency.sum += seconds;
    latency.count += 1;
  }
}

/** One line of the histogram, as prom-client builds it: buckets carry a null exemplar, sum and count none. */
const pair = (
  labels: Record<string, string | number>,
  value: number,
  metricName: string,
  shared: object,
) => ({
  labels,
  sharedLabels: { ...shared },
  value,
  metricName,
  exemplar: metricName.endsWith('_bucket') ? null : undefined,
});

/** The map under `key`, made empty when there is none. */
function inner<K, V>(outer: Map<string, Map<K, V>>, key: string): Map<K, V> {
  let found = outer.get(key);
  if (!found) {
    found = new Map();
    outer.set(key, found);
  }
  return found;
}

/** Never incremented itself: its values are the series of a RequestMetrics. */
class RequestCounter extends Counter<'method' | 'route' | 'status'> {
  constructor(
    registry: Registry,
    private readonly series: () => readonly CountSeries[],
  ) {
    super({
      name: 'gatehouse_http_requests_total',
      help: 'HTTP requests answered, by method, route pattern and status',
      labelNames: ['method', 'route', 'status'] as const,
      registers: [registry],
    });
  }

  override async get() {
    const values = this.series().map((s) => ({ value: s.value, labels: { ...s.labels } }));
    return { ...(await super.get()), values };
  }
}

/**
 * Never observed itself: its values are the series of a RequestMetrics. prom-client's registry
 * and its own get() read getForPromString(), which answers in the shape prom-client's gives.
 */
class LatencyHistogram extends Histogram<'method' | 'route'> {
  constructor(
    registry: Registry,
    private readonly series: () => readonly LatencySeries[],
  ) {
    super({
      name: LATENCY,
      help: LATENCY_HELP,
      labelNames: ['method', 'route'] as const,
      buckets: [...LATENCY_BUCKETS],
      registers: [registry],
    });
  }

  async getForPromString() {
    const values = [];
    for (const s of this.series()) {
      let cumulative = 0;
      for (const [i, le] of LATENCY_BUCKETS.entries()) {
        cumulative += s.buckets[i] as number;
        values.push(pair({ le }, cumulative, `${LATENCY}_bucket`, s.labels));
      }
      values.push(pair({ le: '+Inf' }, s.count, `${LATENCY}_bucket`, s.labels));
      values.push(pair({}, s.sum, `${LATENCY}_sum`, s.labels));
      values.push(pair({}, s.count, `${LATENCY}_count`, s.labels));
    }
    return {
      name: LATENCY,
      help: LATENCY_HELP,
      type: 'histogram',
      values,
      aggregator: 'sum',
    };
  }
}
