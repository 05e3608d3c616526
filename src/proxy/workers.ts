/**
 * proxy.workers: several processes serving one listener (node:cluster; the primary accepts and
 * hands connections out in turn, on every platform alike). The primary does no proxying: it
 * checks the settings, makes the keys that must be the same in every worker, starts the workers,
 * passes SIGHUP on, restarts a worker that dies (a few times a minute at most), and stops them.
 *
 * Consistent across workers: the session cookie key and the assertion key (a generated key is
 * made once here and handed to every worker in its environment, so a cookie or an assertion made
 * by one worker verifies in any other); the settings (each worker loads the same sources). Each
 * worker keeps its own caches (API keys, verified cookies, renewals), whose lifetimes bound what
 * any one of them may still believe, exactly as for one process (docs/proxy.md).
 */
import cluster, { type Worker } from 'node:cluster';
import { generateKeyPairSync } from 'node:crypto';
import type { Logger } from 'pino';
import type { ProxyConfig } from '../config/proxy.js';

/** A worker dying more often than this in a minute stops the proxy (it would only die again). */
const MAX_RESTARTS_PER_MINUTE = 10;

const generatedPem = () =>
  generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({
    type: 'pkcs8',
    format: 'pem',
  }) as string;

/** The number of workers to run: proxy.workers, but one when ACME obtains the certificates. */
export function workerCount(config: ProxyConfig, log: Logger): number {
  const acme = config.proxy.tls && config.proxy.cert === '';
  if (acme && config.proxy.workers > 1) {
    log.warn(
      { workers: config.proxy.workers },
      'proxy.workers: certificates from ACME are obtained by one process; running one worker (set proxy.cert and proxy.key to use more)',
    );
    return 1;
  }
  return config.proxy.workers;
}

/** Runs the primary: returns once the first worker listens, or throws when workers cannot start. */
export async function runPrimary(config: ProxyConfig, count: number, log: Logger): Promise<void> {
  const env: Record<string, string> = {};
  if (config.proxy.cookiekey === '') {
    env.SVC_PROXY_COOKIEKEY = generatedPem();
    log.warn(
      'proxy.cookiekey is unset: generated a key for all workers; session cookies will not survive a restart',
    );
  }
  if (config.proxy.assertionkey === '') {
    env.SVC_PROXY_ASSERTIONKEY = generatedPem();
    log.warn(
      'proxy.assertionkey is unset: generated a key for all workers; X-Service-Assertion keys change at restart and differ between proxies',
    );
  }
  let stopping = false;
  const restarts: number[] = [];
  const fork = () => cluster.fork({ ...env, GATEHOUSE_PROXY_WORKER: '1' });
  const workers = new Set<Worker>();
  let firstListening: () => void = () => {};
  let firstFailed: (e: Error) => void = () => {};
  const first = new Promise<void>((resolve, reject) => {
    firstListening = resolve;
    firstFailed = reject;
  });
  let anyListening = false;
  cluster.on('listening', () => {
    if (!anyListening) {
      anyListening = true;
      firstListening();
    }
  });
  cluster.on('exit', (worker, code, signal) => {
    workers.delete(worker);
    if (stopping) {
      if (workers.size === 0) process.exit(0);
      return;
    }
    const now = Date.now();
    restarts.push(now);
    while (restarts.length > 0 && now - (restarts[0] as number) > 60_000) restarts.shift();
    if (!anyListening || restarts.length > MAX_RESTARTS_PER_MINUTE) {
      log.error({ code, signal }, 'a proxy worker exited and workers keep failing: stopping');
      firstFailed(new Error(`a proxy worker exited with ${signal ?? code} before listening`));
      stopping = true;
      for (const w of workers) w.kill('SIGTERM');
      if (workers.size === 0) process.exit(1);
      return;
    }
    log.warn({ code, signal, pid: worker.process.pid }, 'a proxy worker exited: starting another');
    workers.add(fork());
  });
  for (let i = 0; i < count; i++) workers.add(fork());
  process.on('SIGHUP', () => {
    log.info('SIGHUP: reloading settings in every worker');
    for (const w of workers) w.process.kill('SIGHUP');
  });
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal, workers: workers.size }, 'proxy shutting down');
    for (const w of workers) w.process.kill('SIGTERM');
    if (workers.size === 0) process.exit(0);
    // Workers finish their requests; one that does not within 30 s is killed.
    setTimeout(() => {
      for (const w of workers) w.process.kill('SIGKILL');
    }, 30_000).unref();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  await first;
  log.info({ workers: count }, 'proxy workers started');
}

export const isProxyWorker = () => cluster.isWorker && process.env.GATEHOUSE_PROXY_WORKER === '1';
