import { X509Certificate } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import { join } from 'node:path';
import tls from 'node:tls';
import * as acme from 'acme-client';
import type { Logger } from 'pino';
import { ConfigError } from '../config/load.js';
import type { ProxyConfig } from '../config/proxy.js';

const CHALLENGE_PREFIX = '/.well-known/acme-challenge/';
/** Renew when a certificate has less than this left. */
const RENEW_BEFORE_MS = 30 * 86_400_000;
const RENEW_CHECK_MS = 12 * 3_600_000;
const HOSTNAME = /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

interface Held {
  context: tls.SecureContext;
  notAfter: number;
}

/**
 * Certificates of the proxy: from proxy.cert/proxy.key, or obtained on demand by ACME (HTTP-01,
 * answered by the redirect listener) for proxy.name (or the first host asked for) and the App's
 * VirtualHost names, never for other names. Obtained certificates are kept in acme.dir and
 * renewed 30 days before they expire.
 */
export class TlsManager {
  private readonly held = new Map<string, Held>();
  private readonly obtaining = new Map<string, Promise<Held>>();
  private readonly challenges = new Map<string, string>();
  private virtualHosts = new Set<string>();
  private name: string;
  private client: acme.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private staticOptions: { cert: Buffer; key: Buffer } | undefined;
  /** The DNS names of proxy.cert (lower case; "*.example" for wildcards). */
  private staticNames: ReadonlySet<string> | undefined;

  private constructor(
    private readonly config: ProxyConfig,
    private readonly log: Logger,
  ) {
    this.name = config.proxy.name.toLowerCase();
  }

  static async create(config: ProxyConfig, log: Logger): Promise<TlsManager> {
    const m = new TlsManager(config, log);
    if (config.proxy.cert) {
      const read = (key: 'cert' | 'key') => {
        try {
          return readFileSync(config.proxy[key]);
        } catch (e) {
          throw new ConfigError(`proxy.${key}`, `cannot read ${config.proxy[key]}: ${(e as Error).message}`);
        }
      };
      m.staticOptions = { cert: read('cert'), key: read('key') };
      m.staticNames = certificateNames(m.staticOptions.cert);
      try {
        tls.createSecureContext(m.staticOptions);
      } catch (e) {
        throw new ConfigError(
          'proxy.cert',
          `the certificate and key do not make a TLS identity: ${(e as Error).message}`,
        );
      }
      return m;
    }
    await m.prepareAcme();
    return m;
  }

  private get dir() {
    return this.config.acme.dir;
  }

  private async prepareAcme() {
    try {
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    } catch (e) {
      throw new ConfigError('acme.dir', `cannot create ${this.dir}: ${(e as Error).message}`);
    }
    if (this.config.acme.cacert) {
      let ca: Buffer;
      try {
        ca = readFileSync(this.config.acme.cacert);
      } catch (e) {
        throw new ConfigError(
          'acme.cacert',
          `cannot read ${this.config.acme.cacert}: ${(e as Error).message}`,
        );
      }
      acme.axios.defaults.httpsAgent = new https.Agent({ ca });
    }
    const accountFile = join(this.dir, 'account.key');
    if (!existsSync(accountFile)) writeSecret(accountFile, await acme.crypto.createPrivateEcdsaKey('P-256'));
    this.client = new acme.Client({
      directoryUrl: this.config.acme.server,
      accountKey: readFileSync(accountFile),
    });
    // Certificates obtained before a restart.
    for (const name of [this.name, ...this.virtualHosts]) if (name) this.loadStored(name);
    this.timer = setInterval(() => void this.renewDue(), RENEW_CHECK_MS);
    this.timer.unref();
  }

  serverOptions(): https.ServerOptions {
    if (this.staticOptions) return { ...this.staticOptions };
    return {
      SNICallback: (servername, cb) => {
        this.contextFor(servername).then(
          (ctx) => cb(null, ctx),
          (e: unknown) => {
            this.log.warn({ host: servername, reason: (e as Error).message }, 'no certificate for this host');
            cb(e as Error);
          },
        );
      },
    };
  }

  /** Plaintext listener: ACME HTTP-01 answers, and a redirect to https for everything else. */
  redirectHandler(httpsPort: number) {
    return (req: IncomingMessage, res: ServerResponse) => {
      const url = req.url ?? '/';
      if (url.startsWith(CHALLENGE_PREFIX)) {
        const answer = this.challenges.get(url.slice(CHALLENGE_PREFIX.length));
        res.writeHead(answer ? 200 : 404, { 'content-type': 'text/plain' });
        return void res.end(answer ?? 'no such challenge\n');
      }
      const host = String(req.headers.host ?? '')
        .replace(/:\d+$/, '')
        .toLowerCase();
      const target = HOSTNAME.test(host) ? host : this.name;
      if (!target) {
        res.writeHead(400, { 'content-type': 'text/plain' });
        return void res.end('use https\n');
      }
      const port = httpsPort === 443 ? '' : `:${httpsPort}`;
      res.writeHead(308, { location: `https://${target}${port}${url.startsWith('/') ? url : '/'}` });
      res.end();
    };
  }

  /** The first host name seen, when proxy.name is unset. */
  learnName(name: string) {
    if (this.name === '' && HOSTNAME.test(name.toLowerCase())) {
      this.name = name.toLowerCase();
      this.log.info({ name: this.name }, 'proxy.name learned from the first request');
    }
  }

  setVirtualHosts(names: string[]) {
    this.virtualHosts = new Set(names.map((n) => n.toLowerCase()).filter((n) => HOSTNAME.test(n)));
  }

  /**
   * Does this proxy hold a certificate for `name` (lower case)? proxy.cert's DNS names (a
   * wildcard covers one label), or a certificate obtained by ACME, or a VirtualHost that gets one.
   * A name learned from the first TLS request counts once its certificate is held: a CA has then
   * checked that the name reaches this proxy.
   */
  serves(name: string): boolean {
    if (this.staticNames) {
      if (this.staticNames.has(name)) return true;
      const dot = name.indexOf('.');
      return dot > 0 && this.staticNames.has(`*${name.slice(dot)}`);
    }
    return this.held.has(name) || this.virtualHosts.has(name);
  }

  /** The names certificates may be obtained for. */
  allowedNames(): string[] {
    return [...new Set([this.name, ...this.virtualHosts].filter(Boolean))];
  }

  private async contextFor(servername: string): Promise<tls.SecureContext> {
    const name = servername.toLowerCase();
    if (!HOSTNAME.test(name)) throw new Error('not a host name');
    // Unset proxy.name: the first host asked for becomes it (spec: "determined at the first request").
    this.learnName(name);
    const held = this.held.get(name) ?? this.loadStored(name);
    if (held && held.notAfter > Date.now()) return held.context;
    if (!this.allowedNames().includes(name))
      throw new Error(`${name} is neither proxy.name nor a VirtualHost of this App`);
    return (await this.obtain(name)).context;
  }

  private loadStored(name: string): Held | undefined {
    const certFile = join(this.dir, `${name}.crt`);
    const keyFile = join(this.dir, `${name}.key`);
    if (!existsSync(certFile) || !existsSync(keyFile)) return undefined;
    try {
      const cert = readFileSync(certFile);
      const key = readFileSync(keyFile);
      const notAfter = Date.parse(new X509Certificate(cert).validTo);
      const held = { context: tls.createSecureContext({ cert, key }), notAfter };
      this.held.set(name, held);
      return held;
    } catch (e) {
      this.log.warn({ name, reason: (e as Error).message }, 'ignoring an unreadable stored certificate');
      return undefined;
    }
  }

  /** Obtains (or renews) the certificate for one name; concurrent callers share one order. */
  obtain(name: string): Promise<Held> {
    let p = this.obtaining.get(name);
    if (!p) {
      p = this.order(name).finally(() => this.obtaining.delete(name));
      this.obtaining.set(name, p);
    }
    return p;
  }

  private async order(name: string): Promise<Held> {
    const client = this.client;
    if (!client) throw new Error('ACME is not configured');
    const [key, csr] = await acme.crypto.createCsr(
      { commonName: name, altNames: [name] },
      await acme.crypto.createPrivateEcdsaKey('P-256'),
    );
    const email = this.config.acme.email || `hostmaster@${this.name || name}`;
    this.log.info({ name, server: this.config.acme.server }, 'obtaining a certificate by ACME');
    const cert = await client.auto({
      csr,
      email,
      termsOfServiceAgreed: true,
      challengePriority: ['http-01'],
      // The CA checks the challenge itself; a self-check would need our own name to resolve here.
      skipChallengeVerification: true,
      challengeCreateFn: async (_authz, challenge, keyAuthorization) => {
        this.challenges.set(challenge.token, keyAuthorization);
      },
      challengeRemoveFn: async (_authz, challenge) => {
        this.challenges.delete(challenge.token);
      },
    });
    writeSecret(join(this.dir, `${name}.key`), key);
    writeSecret(join(this.dir, `${name}.crt`), Buffer.from(cert));
    const notAfter = Date.parse(new X509Certificate(cert).validTo);
    const held = { context: tls.createSecureContext({ cert, key }), notAfter };
    this.held.set(name, held);
    this.log.info({ name, notAfter: new Date(notAfter).toISOString() }, 'certificate obtained');
    return held;
  }

  private async renewDue() {
    for (const [name, h] of this.held) {
      if (h.notAfter - Date.now() > RENEW_BEFORE_MS) continue;
      try {
        await this.obtain(name);
      } catch (e) {
        this.log.error({ name, reason: (e as Error).message }, 'certificate renewal failed; will retry');
      }
    }
  }

  /** For tests: the account contact the ACME server holds. */
  async accountContact(): Promise<string[] | undefined> {
    const acct = await this.client?.getAccountUrl();
    if (!acct || !this.client) return undefined;
    const a = (await this.client.createAccount({ onlyReturnExisting: true })) as { contact?: string[] };
    return a.contact;
  }

  close() {
    if (this.timer) clearInterval(this.timer);
  }
}

/** The DNS names in a PEM certificate's subjectAltName; none when it cannot be read. */
function certificateNames(pem: Buffer): ReadonlySet<string> {
  try {
    const alt = new X509Certificate(pem).subjectAltName ?? '';
    return new Set(
      alt
        .split(',')
        .map((e) => e.trim())
        .filter((e) => e.startsWith('DNS:'))
        .map((e) => e.slice(4).toLowerCase()),
    );
  } catch {
    return new Set();
  }
}

/** Writes a file only its owner can read, atomically (a half-written key is never read back). */
function writeSecret(path: string, data: Buffer) {
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, data, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}
