import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * The proxy's Prometheus metrics (proxy.metrics; docs/directory.md): requests answered by method
 * and status, and the time to the end of each answer. prom-client is loaded only when the setting
 * is given, so a proxy without it loads nothing more (test/structure/modules.test.ts).
 */
export interface ProxyMetrics {
  /** The proxy's request handler, observed. */
  wrap(handler: Handler): Handler;
  /** The listener's port. */
  port: number;
  close(): Promise<void>;
}

export async function startProxyMetrics(host: string, port: number): Promise<ProxyMetrics> {
  const { Counter, Histogram, Registry, collectDefaultMetrics } = await import('prom-client');
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'gatehouse_proxy_' });
  const requests = new Counter({
    name: 'gatehouse_proxy_requests_total',
    help: 'Requests answered by the proxy (its own answers and upstream responses), by method and status',
    labelNames: ['method', 'status'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'gatehouse_proxy_request_duration_seconds',
    help: 'Time from the request to the end of its answer, by method',
    labelNames: ['method'] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: GET /metrics\n');
      return;
    }
    registry.metrics().then(
      (text) =>
        res.writeHead(200, { 'content-type': registry.contentType, 'cache-control': 'no-store' }).end(text),
      () => res.writeHead(500).end(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    wrap(handler) {
      return (req, res) => {
        const start = process.hrtime.bigint();
        const method = METHODS.has(req.method ?? '') ? (req.method as string) : 'OTHER';
        res.once('close', () => {
          requests.inc({ method, status: String(res.statusCode) });
          latency.observe({ method }, Number(process.hrtime.bigint() - start) / 1e9);
        });
        handler(req, res);
      };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections?.();
      }),
  };
}
