import { ConfigError } from '../config/load.js';
import { loadProxyConfig } from '../config/proxy.js';
import { createLogger } from '../core/logger.js';
import { accessLogger } from './accesslog.js';
import { startProxy, tokenProblem } from './run.js';
import { isProxyWorker, runPrimary, workerCount } from './workers.js';

/**
 * `gatehouse proxy`: load settings, listen, reload on SIGHUP, finish requests on SIGTERM/SIGINT.
 * With proxy.workers above one, this process is the primary (src/proxy/workers.ts) and each
 * worker, started from the same command, runs the proxy.
 */
export async function runProxyCommand(
  flags: Record<string, string | undefined>,
  file: string | undefined,
  overrides: string[],
) {
  const sources = { file, env: process.env, flags, overrides };
  const config = loadProxyConfig(sources);
  const logger = createLogger(process.env.SVC_PROXY_LOGLEVEL ?? 'info');
  if (!isProxyWorker()) {
    const problem = tokenProblem(config.auth.token);
    if (problem) throw new ConfigError('auth.token', problem);
    const count = workerCount(config, logger);
    if (count > 1) return runPrimary(config, count, logger);
  }
  const access = accessLogger(process.env.SVC_PROXY_LOGLEVEL ?? 'info');
  const running = await startProxy(config, {
    logger,
    accessLogger: access.sink ?? null,
    sources,
  });
  process.on('SIGHUP', () => {
    logger.info('SIGHUP: reloading settings');
    running.reload();
  });
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'proxy shutting down');
    await running.close();
    access.flush();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}
