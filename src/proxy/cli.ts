import { acmeSection, authSection, loadProxyConfig, proxySection, redirectSection } from '../config/proxy.js';
import type { Setting } from '../config/setting.js';
import { createLogger } from '../service.js';
import { startProxy } from './run.js';

/** Every proxy setting with a flag, keyed by its section.name key (flag names are unique across them). */
export const proxyFlagSettings: Record<string, Setting<unknown>> = Object.fromEntries(
  [proxySection, authSection, redirectSection, acmeSection].flatMap((s) =>
    Object.values(s as Record<string, Setting<unknown>>).map((x) => [x.key, x]),
  ),
);

/** `gatehouse proxy`: load settings, listen, reload on SIGHUP, finish requests on SIGTERM/SIGINT. */
export async function runProxyCommand(
  flags: Record<string, string | undefined>,
  file: string | undefined,
  overrides: string[],
) {
  const sources = { file, env: process.env, flags, overrides };
  const config = loadProxyConfig(sources);
  const logger = createLogger(process.env.SVC_PROXY_LOGLEVEL ?? 'info');
  const running = await startProxy(config, { logger, sources });
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
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}
