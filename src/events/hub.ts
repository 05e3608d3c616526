// Why ~440 lines: the hub is where every cause that ends or changes a stream meets its connections
// (change-log fan-out, credential and tenant watches, session signals between instances and their
// re-check after a LISTEN reconnect, keep-alive, shutdown); each part needs the connection set.
import { randomUUID } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import { userUsable } from '../auth/apikeys.js';
import { classify, requiredLevel } from '../auth/integrity.js';
import type { Principal } from '../auth/principal.js';
import { sessionById, sessionEventsOf } from '../auth/session/sessions.js';
import { APIKey } from '../objects/apikey.js';
import { Tenant } from '../objects/tenant.js';
import { User } from '../objects/user.js';
import type { Change } from '../store/objects.js';
import type { ServiceContext } from '../store/service.js';
import { Connection, type ConnectionHub } from './connection.js';
import { CloseCodes, INTEGRITY_CHANGED, RESYNC } from './protocol.js';
import { takeSnapshot } from './snapshot.js';
import type { ObjectChange, SessionChange } from './special.js';
import { Outgoing, type Subscription } from './subscription.js';
import { ChangeTailer, SIGNALS_CHANNEL } from './tailer.js';
import type { EventHubOptions, EventSocket } from './types.js';
import { expiryOf, keyStillGrants, streamHolder, suspensionOf } from './validity.js';

export type { EventHubOptions, EventSocket } from './types.js';

export const DEFAULT_OPTIONS: EventHubOptions = {
  pingIntervalMs: 30_000,
  maxBufferedBytes: 4 * 1024 * 1024,
  snapshotHighWaterBytes: 1024 * 1024,
  snapshotStallMs: 30_000,
  maxPendingChanges: 10_000,
  maxSubscriptions: 64,
  maxStreamsPerUser: 32,
  pollIntervalMs: 5_000,
};

/** The largest client message accepted (ws closes the connection with 1009 beyond it). */
export const MAX_MESSAGE_BYTES = 16 * 1024;

/**
 * The event hub of one service instance: the open connections, one change-log tailer for all
 * of them, keep-alive, and the hooks other parts of the service call (integrityChanged,
 * endStreams). Created once per app (src/api/events.ts), closed with it.
 */
export class EventHub implements ConnectionHub {
  readonly options: EventHubOptions;
  readonly logger: ServiceContext['logger'];
  private readonly connections = new Set<Connection>();
  private readonly byKind = new Map<string, Set<Subscription>>();
  private readonly tailer: ChangeTailer;
  private pingTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** How subscriptions read their snapshot (replaceable so tests can widen the race window). */
  snapshot = takeSnapshot;
  /** Tells this instance's own signals from the others'. */
  private readonly instanceId = randomUUID();
  private readonly sessionListeners = new Set<(ev: SessionChange) => Promise<void>>();
  private sessionQueue: Promise<void> = Promise.resolve();
  private readonly objectListeners = new Set<(ev: ObjectChange) => void>();
  /** Session writes of this service (the sign-in code's sessionEventsOf). */
  private readonly onLocalSession = (ev: SessionChange) => {
    this.sessionChanged(ev);
    void this.signal({
      Event: 'SessionChanged',
      SessionID: ev.sessionId,
      UserID: ev.userId,
      Deleted: ev.deleted,
    }).catch((err) => this.logger.warn({ err }, 'event stream: cannot signal a session change'));
  };

  constructor(
    readonly ctx: ServiceContext,
    options: Partial<EventHubOptions> = {},
  ) {
    this.options = { ...DEFAULT_OPTIONS, ...options };
    this.logger = ctx.logger;
    this.tailer = new ChangeTailer(
      ctx.store,
      (changes) => this.fanOut(changes),
      () => this.connections.size === 0,
      ctx.logger,
      { pollIntervalMs: this.options.pollIntervalMs, batchSize: 1000 },
      (payload) => this.applySignal(payload),
      () => this.resync(),
      () => this.recheckSessionStreams(),
    );
    sessionEventsOf(ctx).on('change', this.onLocalSession);
    // Every instance listens from the start, not from its first subscriber: another instance's
    // commits and signals drop this one's caches (validated API keys) at once.
    this.startTailer();
  }

  private tailerRetry: NodeJS.Timeout | undefined;

  /** Starts the change-log tailer, trying again every second while the database cannot answer. */
  private startTailer() {
    this.tailer.start().catch((err: unknown) => {
      if (this.closed) return;
      this.logger.warn({ err }, 'event stream: cannot start reading the change log; trying again');
      this.tailerRetry = setTimeout(() => this.startTailer(), 1000);
      this.tailerRetry.unref();
    });
  }

  /**
   * After the LISTEN connection came back: session ends and level changes signalled by other
   * instances meanwhile were missed, so every session-authenticated stream is checked against
   * the sessions table, as a signal would have had it checked.
   */
  private recheckSessionStreams() {
    const sessions = new Set<string>();
    for (const c of this.connections)
      if (c.principal.via === 'session' && c.principal.sessionId) sessions.add(c.principal.sessionId);
    if (sessions.size === 0) return;
    this.sessionQueue = this.sessionQueue
      .then(async () => {
        for (const sessionId of sessions) {
          if (this.closed) return;
          const conn = [...this.connections].find((c) => c.principal.sessionId === sessionId);
          if (conn) await this.checkSessions({ sessionId, userId: conn.principal.userId, deleted: false });
        }
      })
      .catch((err) => this.logger.warn({ err }, 'event stream: checking sessions after a reconnect failed'));
  }

  /**
   * A session changed (here or, on PostgreSQL, on another instance): the Auth and OtherSession
   * subscriptions update first, then the session's streams are checked: ended → 4001; integrity
   * level no longer the one the stream was opened with → StatusCode 100 frame and close.
   */
  private sessionChanged(ev: SessionChange) {
    this.sessionQueue = this.sessionQueue
      .then(async () => {
        if (this.closed) return;
        await Promise.allSettled([...this.sessionListeners].map((fn) => fn(ev)));
        await this.checkSessions(ev);
      })
      .catch((err) => this.logger.warn({ err }, 'event stream: handling a session change failed'));
  }

  onSessionChange(fn: (ev: SessionChange) => Promise<void>): () => void {
    this.sessionListeners.add(fn);
    return () => this.sessionListeners.delete(fn);
  }

  /** Every object written, as the change log delivers it (special kinds that depend on objects). */
  onObjectChange(fn: (ev: ObjectChange) => void): () => void {
    this.objectListeners.add(fn);
    return () => this.objectListeners.delete(fn);
  }

  private async checkSessions(ev: SessionChange) {
    const affected = [...this.connections].filter(
      (c) =>
        c.principal.via === 'session' &&
        (ev.sessionId !== '' ? c.principal.sessionId === ev.sessionId : c.principal.userId === ev.userId),
    );
    for (const conn of affected) {
      const sid = conn.principal.sessionId as string;
      const s = await sessionById(this.ctx, sid);
      if (!s || s.userId !== conn.principal.userId) {
        conn.close(CloseCodes.CredentialsRevoked, 'the session ended');
      } else if (s.level !== conn.principal.integrityLevel) {
        this.integrityChanged((_p) => _p === conn.principal);
      } else {
        conn.sessionUntil = s.expireTime;
      }
    }
  }

  /** Changes limits at run time (tests, tuning); the ping timer restarts with the new interval. */
  configure(options: Partial<EventHubOptions>) {
    Object.assign(this.options, options);
    if (this.pingTimer) this.startPing();
    if (options.pollIntervalMs !== undefined) this.tailer.setPollInterval(options.pollIntervalMs);
  }

  /** The number of open connections. */
  get size() {
    return this.connections.size;
  }

  /** May the holder of these credentials open one more stream (maxStreamsPerUser)? */
  mayOpen(principal: Principal): boolean {
    const holder = streamHolder(principal);
    let n = 0;
    for (const conn of this.connections) if (streamHolder(conn.principal) === holder) n++;
    return n < this.options.maxStreamsPerUser;
  }

  /** Takes over an upgraded socket of an authenticated caller. */
  async accept(socket: EventSocket, principal: Principal, request?: FastifyRequest): Promise<Connection> {
    // Listeners first, so that no message sent right after the handshake is lost.
    const conn = new Connection(this, socket, principal, request);
    if (this.closed) {
      conn.close(CloseCodes.GoingAway, 'server shutting down');
      return conn;
    }
    // The handshake was refused with 429 over the limit; handshakes that raced past it close here.
    if (!this.mayOpen(principal)) {
      conn.close(CloseCodes.PolicyViolation, 'too many streams open for these credentials');
      return conn;
    }
    this.connections.add(conn);
    try {
      await this.tailer.start();
      if (!this.pingTimer) this.startPing();
      await this.loadValidity(conn);
      // Revoked between authentication and now (the tailer only reports later changes).
      if (Date.now() >= conn.validUntil)
        conn.close(CloseCodes.CredentialsRevoked, 'the credentials are no longer valid');
    } catch (err) {
      this.logger.error({ err }, 'event stream: cannot start');
      conn.close(CloseCodes.Internal, 'internal error');
    }
    return conn;
  }

  /**
   * The integrity level of a session changed: every matching connection gets the StatusCode 100
   * frame and is closed; the client reconnects at once. Returns how many were closed. The sign-in
   * code calls this, e.g. `app.events.integrityChanged((p) => p.sessionId === id)`.
   */
  integrityChanged(match: (principal: Principal, request: FastifyRequest | undefined) => boolean): number {
    let n = 0;
    for (const conn of [...this.connections]) {
      if (!match(conn.principal, conn.request)) continue;
      conn.send({ ID: '', Item: {}, ...INTEGRITY_CHANGED });
      conn.close(CloseCodes.IntegrityChanged, INTEGRITY_CHANGED.StatusText);
      n++;
    }
    return n;
  }

  /**
   * The change log lost changes before this instance read them: every stream gets the
   * StatusCode 205 frame and is closed (4009); clients resubscribe and receive a fresh snapshot.
   * Credentials are checked again on reconnect (a lost change may have revoked them), and the
   * caches that follow the change log (validated API keys) are dropped.
   */
  resync(): number {
    this.ctx.store.commits.emit('remote');
    let n = 0;
    for (const conn of [...this.connections]) {
      conn.send({ ID: '', Item: {}, ...RESYNC });
      conn.close(CloseCodes.Resync, RESYNC.StatusText);
      n++;
    }
    return n;
  }

  /** Closes the matching connections with 4001 (ended session, revoked credential). */
  endStreams(
    match: (principal: Principal, request: FastifyRequest | undefined) => boolean,
    reason = 'credentials revoked',
  ): number {
    let n = 0;
    for (const conn of [...this.connections]) {
      if (!match(conn.principal, conn.request)) continue;
      conn.close(CloseCodes.CredentialsRevoked, reason);
      n++;
    }
    return n;
  }

  /**
   * A session's integrity level changed: its streams, on every instance sharing the database,
   * get the StatusCode 100 frame and are closed. For the sign-in code (e.g. after /auth/boost).
   */
  async sessionIntegrityChanged(sessionId: string): Promise<void> {
    this.integrityChanged((p) => p.sessionId === sessionId);
    await this.signal({ Event: 'IntegrityChanged', SessionID: sessionId });
  }

  /** A session ended (sign-out, expiry, revocation): its streams on every instance close with 4001. */
  async sessionEnded(sessionId: string): Promise<void> {
    this.endStreams((p) => p.sessionId === sessionId, 'the session ended');
    await this.signal({ Event: 'SessionEnded', SessionID: sessionId });
  }

  /** Tells the other instances (PostgreSQL NOTIFY; SQLite has one process). */
  private async signal(payload: Record<string, unknown>) {
    if (this.ctx.db.dialect !== 'postgres' || this.closed) return;
    const text = JSON.stringify({ ...payload, From: this.instanceId });
    await sql`SELECT pg_notify(${SIGNALS_CHANNEL}, ${text})`.execute(this.ctx.db.kysely);
  }

  private applySignal(text: string) {
    let msg: { Event?: unknown; SessionID?: unknown; UserID?: unknown; Deleted?: unknown; From?: unknown };
    try {
      msg = JSON.parse(text) as typeof msg;
    } catch {
      return;
    }
    if (msg.From === this.instanceId) return;
    const id = msg.SessionID;
    if (msg.Event === 'SessionChanged' && typeof id === 'string' && typeof msg.UserID === 'string') {
      this.sessionChanged({ sessionId: id, userId: msg.UserID, deleted: msg.Deleted === true });
      return;
    }
    if (typeof id !== 'string' || id === '') return;
    if (msg.Event === 'IntegrityChanged') this.integrityChanged((p) => p.sessionId === id);
    else if (msg.Event === 'SessionEnded') this.endStreams((p) => p.sessionId === id, 'the session ended');
  }

  register(sub: Subscription) {
    let set = this.byKind.get(sub.type.kind);
    if (!set) {
      set = new Set();
      this.byKind.set(sub.type.kind, set);
    }
    set.add(sub);
  }

  detach(conn: Connection) {
    this.connections.delete(conn);
    for (const sub of conn.subscriptions.values()) {
      if (sub) this.byKind.get(sub.type.kind)?.delete(sub);
    }
  }

  private fanOut(changes: Change[]) {
    for (const change of changes) {
      const o = new Outgoing(change);
      for (const fn of this.objectListeners)
        fn({ type: change.type, id: change.id, deleted: change.data === null });
      if (change.type === APIKey.kind || change.type === User.kind) this.watchCredentials(o);
      else if (change.type === Tenant.kind) this.watchTenantLevels(o);
      const subs = this.byKind.get(change.type);
      if (!subs) continue;
      for (const sub of subs) sub.offer(o);
    }
  }

  /** A deleted or changed API key, or a user who can no longer act, ends the streams opened with them. */
  private watchCredentials(o: Outgoing) {
    const { type, id } = o.change;
    for (const conn of [...this.connections]) {
      const p = conn.principal;
      if (type === APIKey.kind && p.keyId === id) {
        const reason = keyStillGrants(o, p);
        if (reason) conn.close(CloseCodes.CredentialsRevoked, reason);
        else conn.keyUntil = expiryOf(o.parsed.ExpireTime);
      } else if (type === User.kind && p.userId === id && p.userId !== '') {
        if (o.change.data === null || !userUsable(o.parsed))
          conn.close(CloseCodes.CredentialsRevoked, 'the user was deleted, disabled or suspended');
        // A session's admin scope comes from User.Admin when it authenticated: a demotion must
        // end the admin subscriptions too (an API key's scopes are its own, checked above).
        else if (p.via === 'session' && p.scopes.has('admin') && o.parsed.Admin !== true)
          conn.close(CloseCodes.CredentialsRevoked, 'the user is no longer an administrator');
        else conn.userUntil = suspensionOf(o.parsed.SuspendAfter);
      }
    }
  }

  /**
   * The tenant's integrity levels changed: session streams opened at a level the tenant no
   * longer accepts for them end (4001); the client reconnects and is asked for another factor.
   * API keys have no integrity level.
   */
  private watchTenantLevels(o: Outgoing) {
    if (o.change.data === null) return;
    for (const conn of [...this.connections]) {
      const p = conn.principal;
      // A session still signing in (no scopes, kind Auth only) was below the level already.
      if (p.via !== 'session' || !conn.request || p.scopes.size === 0) continue;
      const need = requiredLevel(o.parsed, classify(conn.request, p.scopes.has('admin')));
      if ((p.integrityLevel ?? 0) < need)
        conn.close(CloseCodes.CredentialsRevoked, `the tenant now requires integrity level ${need}`);
    }
  }

  /** Reads when the connection's key expires and its user's suspension starts. */
  private async loadValidity(conn: Connection) {
    const p = conn.principal;
    if (p.keyId) {
      const key = await this.ctx.store.get(APIKey, p.keyId);
      conn.keyUntil = key ? expiryOf(key.doc.ExpireTime) : 0;
    }
    if (p.sessionId) {
      const s = await sessionById(this.ctx, p.sessionId);
      conn.sessionUntil = s ? s.expireTime : 0;
    }
    if (p.userId) {
      const user = await this.ctx.store.get(User, p.userId);
      conn.userUntil = user && userUsable(user.doc) ? suspensionOf(user.doc.SuspendAfter) : 0;
    }
  }

  // Not a service job (src/core/jobs.ts): the hub starts and stops its pings itself (close()),
  // and their interval changes with configure().
  private startPing() {
    clearInterval(this.pingTimer);
    this.pingTimer = setInterval(() => this.pingAll(), this.options.pingIntervalMs);
    this.pingTimer.unref();
  }

  private pingAll() {
    const now = Date.now();
    for (const conn of [...this.connections]) {
      if (!conn.alive) {
        // No pong (nor message) since the last ping: the peer is gone.
        conn.terminate();
        continue;
      }
      if (now >= conn.validUntil) {
        conn.close(CloseCodes.CredentialsRevoked, 'the credentials expired');
        continue;
      }
      conn.alive = false;
      try {
        conn.socket.ping();
      } catch {
        conn.terminate();
      }
    }
  }

  /** Closes every connection (1001), waits up to `graceMs` for them to go, then drops the rest. */
  async shutdown(graceMs = 1000) {
    this.closed = true;
    const sockets = [...this.connections].map((c) => c.socket);
    for (const conn of [...this.connections]) conn.close(CloseCodes.GoingAway, 'server shutting down');
    const deadline = Date.now() + graceMs;
    while (sockets.some((s) => s.readyState !== 3) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
    }
    for (const s of sockets) if (s.readyState !== 3) s.terminate();
  }

  async close() {
    this.closed = true;
    sessionEventsOf(this.ctx).off('change', this.onLocalSession);
    clearTimeout(this.tailerRetry);
    clearInterval(this.pingTimer);
    this.pingTimer = undefined;
    for (const conn of [...this.connections]) conn.terminate();
    await this.tailer.close();
  }
}
