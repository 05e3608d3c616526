import { Agent, type Dispatcher, request } from 'undici';
import {
  type AccessCheckRequest,
  type AccessCheckResponse,
  BACKCHANNEL,
  type RegisterRequest,
  type RegisterResponse,
  type WireIdentity,
} from '../wire/proxy.js';

/** Why the service refused a back-channel call; `status` is the service's HTTP status. */
export class BackendError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'BackendError';
  }
  /**
   * The credential itself was refused (bad key, ended session, unknown code): the service answers
   * 403 (or 404/400); anything else is an outage or a proxy problem.
   */
  get refused(): boolean {
    return this.status === 403 || this.status === 404 || this.status === 400;
  }
  /** The service refused the proxy's own token (401): no user can be authenticated. */
  get proxyRejected(): boolean {
    return this.status === 401;
  }
}

/**
 * What the proxy needs from the service. The HTTP implementation below talks to auth.server;
 * tests may pass any object of this shape.
 */
export interface AuthBackend {
  register(req: RegisterRequest): Promise<RegisterResponse>;
  /** The identity an API key acts for, if it holds scope user or admin. */
  apiKey(key: string): Promise<WireIdentity>;
  /** Exchanges a one-time sign-in code for the session's identity. */
  exchangeCode(code: string): Promise<WireIdentity>;
  /** Re-validates a service session (when the proxy's cookie has expired). */
  session(sessionId: string): Promise<WireIdentity>;
  accessCheck(req: AccessCheckRequest): Promise<AccessCheckResponse>;
  /** The service's address as the browser sees it (for the sign-in redirect). */
  readonly publicUrl: string;
  /** Resolves when the service answers its health check (GET /healthz 200); for readiness. */
  probe?(): Promise<void>;
  close(): Promise<void>;
}

export class HttpAuthBackend implements AuthBackend {
  private readonly dispatcher: Dispatcher;
  readonly publicUrl: string;

  constructor(
    readonly server: string,
    private readonly token: string,
    opts: { ca?: string | Buffer; timeoutMs?: number } = {},
  ) {
    this.publicUrl = server.replace(/\/+$/, '');
    const timeout = opts.timeoutMs ?? 10_000;
    this.dispatcher = new Agent({
      keepAliveTimeout: 30_000,
      connections: 32,
      headersTimeout: timeout,
      bodyTimeout: timeout,
      connectTimeout: timeout,
      ...(opts.ca ? { connect: { ca: opts.ca } } : {}),
    });
  }

  private async call<T>(path: string, body: unknown): Promise<T> {
    if (this.token === '')
      throw new BackendError(
        401,
        'Unauthenticated',
        'auth.token is not set: the proxy cannot authenticate users',
      );
    const res = await request(`${this.publicUrl}${BACKCHANNEL}${path}`, {
      method: 'POST',
      dispatcher: this.dispatcher,
      headers: {
        authorization: `Bearer ${this.token}`,
        'content-type': 'application/json',
        accept: 'application/json',
      },
      body: JSON.stringify(body),
    });
    const text = await res.body.text();
    if (res.statusCode >= 200 && res.statusCode < 300) return JSON.parse(text) as T;
    let code = String(res.headers['x-error-code'] ?? '');
    let message = `service answered ${res.statusCode}`;
    try {
      const e = JSON.parse(text) as { Code?: string; Message?: string };
      code = e.Code ?? code;
      if (e.Message) message = e.Message;
    } catch {
      // not a JSON error body: keep the status line
    }
    throw new BackendError(res.statusCode, code, message);
  }

  register(req: RegisterRequest) {
    return this.call<RegisterResponse>('/register', req);
  }
  apiKey(key: string) {
    return this.call<WireIdentity>('/apikey', { Key: key });
  }
  exchangeCode(code: string) {
    return this.call<WireIdentity>('/session/exchange', { Code: code });
  }
  session(sessionId: string) {
    return this.call<WireIdentity>('/session/check', { SessionID: sessionId });
  }
  accessCheck(req: AccessCheckRequest) {
    return this.call<AccessCheckResponse>('/accesscheck', req);
  }
  async probe() {
    const res = await request(`${this.publicUrl}/healthz`, {
      method: 'GET',
      dispatcher: this.dispatcher,
      headersTimeout: 2_000,
      bodyTimeout: 2_000,
    });
    await res.body.dump();
    if (res.statusCode !== 200) throw new Error(`the service's health check answered ${res.statusCode}`);
  }
  async close() {
    await this.dispatcher.close();
  }
}
