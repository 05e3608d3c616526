/**
 * The proxy's registration with the service: at start, on every heartbeat and after a reload, it
 * reports itself (RemoteAgent.LastSeen) and learns the App's ProxyAuth, VirtualHosts, name and
 * origins, which the proxy takes into a new snapshot (src/proxy/snapshot.ts).
 */
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { type AuthBackend, BackendError } from './backend.js';
import { defaultMode, type Learned, learnFrom } from './hosts.js';
import type { AccessProxy } from './server.js';
import type { TlsManager } from './tls.js';

export const PROXY_VERSION = '0.1.0';
/**
 * The proxy reports itself (RemoteAgent.LastSeen) this often, and learns the App's ProxyAuth and
 * VirtualHosts again: changes made at the service apply within this time (at once on SIGHUP).
 */
export const HEARTBEAT_MS = 5 * 60_000;
/** Until the first registration succeeds, it is tried again this often (not only per heartbeat). */
const FIRST_REGISTRATION_RETRY_MS = 15_000;

export interface RegistrationOptions {
  proxy: AccessProxy;
  backend: AuthBackend;
  tls: TlsManager | undefined;
  log: Logger;
  /** How often to register again (default HEARTBEAT_MS). */
  heartbeatMs?: number;
  /** How soon to retry a failed first registration (default 15 s). */
  firstRetryMs?: number;
}

export class Registration {
  private heartbeat: NodeJS.Timeout | undefined;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;
  // Registrations may overlap (heartbeat and SIGHUP): an older answer never replaces a newer one.
  private asked = 0;
  private applied = 0;
  /** What the last successful registration said; undefined until one succeeded. */
  learned: Learned | undefined;

  constructor(private readonly o: RegistrationOptions) {}

  /** Registers once (waiting for the answer), then on every heartbeat. */
  async start() {
    await this.register();
    this.heartbeat = setInterval(() => void this.register(), this.o.heartbeatMs ?? HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  stop() {
    this.closed = true;
    if (this.heartbeat) clearInterval(this.heartbeat);
    if (this.retry) clearTimeout(this.retry);
  }

  /** Asks the service now (also after a reload: a changed ProxyAuth or VirtualHost applies at once). */
  async register() {
    const { proxy, backend, log } = this.o;
    if (this.closed || (proxy.tokenProblem && !proxy.appId)) return;
    const n = ++this.asked;
    try {
      const r = await backend.register({
        Name: hostname(),
        Version: PROXY_VERSION,
        Address: proxy.current.config.proxy.name || proxy.firstHost.name || '',
      });
      if (n < this.applied) return;
      this.applied = n;
      this.o.tls?.setVirtualHosts(r.VirtualHosts);
      // A failed registration keeps what was learned before (else the defaults: fail closed).
      const learned = learnFrom(r, log);
      this.learned = learned;
      proxy.setLearned(learned);
      log.info(
        {
          app: r.AppID,
          agent: r.RemoteAgentID,
          mode: defaultMode(proxy.current.config, learned),
          hosts: learned.hosts.size,
        },
        'registered with the service',
      );
    } catch (e) {
      this.failed(e);
    }
  }

  private failed(e: unknown) {
    const { proxy, log } = this.o;
    if (e instanceof BackendError && e.proxyRejected) {
      proxy.tokenProblem = `the service refused auth.token (${e.message})`;
      log.error({ reason: e.message }, 'the service refused auth.token: the proxy cannot authenticate users');
    } else log.warn({ err: String(e) }, 'could not register with the service; will retry');
    // Until the service has answered once, VirtualHost routes and App.ProxyAuth are unknown
    // (requests get the fail-closed defaults): ask again soon rather than at the next heartbeat.
    if (this.learned === undefined && !this.closed && !this.retry && !proxy.tokenProblem) {
      this.retry = setTimeout(() => {
        this.retry = undefined;
        void this.register();
      }, this.o.firstRetryMs ?? FIRST_REGISTRATION_RETRY_MS);
      this.retry.unref();
    }
  }
}
