import { randomUUID } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import type { WebSocket } from 'ws';
import { userUsable } from '../auth/apikeys.js';
import { classify, requiredLevel } from '../auth/integrity.js';
import { access } from '../auth/permissions.js';
import type { Principal } from '../auth/principal.js';
import { sessionById, sessionEvents } from '../auth/session/sessions.js';
import { APIKey } from '../objects/apikey.js';
import { typeByKind } from '../objects/registry.js';
import { Tenant } from '../objects/tenant.js';
import { User } from '../objects/user.js';
import type { Doc } from '../schema/fields.js';
import { timestampMs } from '../schema/fields.js';
import type { ObjectType } from '../schema/type.js';
import type { ServiceContext } from '../store/context.js';
import type { Change } from '../store/objects.js';
import { specialKind } from './kinds.js';
import {
  CloseCodes,
  type EventStreamRequest,
  errorFrame,
  INTEGRITY_CHANGED,
  type ListItemFrame,
  markerFrame,
  objectFrame,
  parseRequest,
  StreamError,
} from './protocol.js';
import { takeSnapshot } from './snapshot.js';
import type { SessionChange } from './special.js';
import { ChangeTailer, SIGNALS_CHANNEL } from './tailer.js';

export interface EventHubOptions {
  /** A ping every interval; a peer that has not answered the previous one is dropped. */
  pingIntervalMs: number;
  /** A connection whose unsent data passes this is closed with 4008 (slow consumer). */
  maxBufferedBytes: number;
  /** While sending a snapshot, wait for the buffer to fall below this before sending more. */
  snapshotHighWaterBytes: number;
  /** A snapshot that cannot make progress for this long closes the connection with 4008. */
  snapshotStallMs: number;
  /** Changes held for one subscription while its snapshot is read and sent. */
  maxPendingChanges: number;
  /** Subscriptions per connection. */
  maxSubscriptions: number;
  /**
   * Open streams per user (per key or session for credentials without a user): every stream
   * holds a socket, buffers and up to maxSubscriptions snapshots, so one user key must not open
   * them without bound.
   */
  maxStreamsPerUser: number;
  /** Safety-net poll of the change log. */
  pollIntervalMs: number;
}

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

/** Client messages waiting to be handled on one connection before it is closed with 1008. */
export const MAX_QUEUED_MESSAGES = 256;

/** The largest client message accepted (ws closes the connection with 1009 beyond it). */
export const MAX_MESSAGE_BYTES = 16 * 1024;

/** The socket operations a connection uses (a ws WebSocket). */
export type EventSocket = Pick<
  WebSocket,
  'send' | 'close' | 'terminate' | 'ping' | 'on' | 'bufferedAmount' | 'readyState'
>;

/** A change as fanned out: its frame is built once, on first use, and shared by every subscriber. */
class Outgoing {
  private frameBuf: Buffer | undefined;
  private doc: Doc | undefined;
  constructor(readonly change: Change) {}
  get frame(): Buffer {
    this.frameBuf ??= objectFrame(this.change.type, this.change.id, this.change.data);
    return this.frameBuf;
  }
  get parsed(): Doc {
    this.doc ??= JSON.parse(this.change.data ?? '{}') as Doc;
    return this.doc;
  }
}

/** One EventStreamRequest for an object type, on one connection. */
class Subscription {
  /** 'snapshot' until the snapshot and marker are sent; changes are held in `pending` meanwhile. */
  phase: 'snapshot' | 'live' = 'snapshot';
  pending: Outgoing[] = [];
  /** Changes up to this sequence number are in the snapshot. */
  seq = 0;
  /** With own-only access: the IDs the subscriber has been shown (to report them leaving). */
  readonly visible = new Set<string>();

  constructor(
    readonly conn: Connection,
    readonly type: ObjectType,
    readonly id: string | undefined,
    /** Own-only access: the user whose objects may be shown; undefined for all. */
    readonly owner: string | undefined,
  ) {}

  offer(o: Outgoing) {
    if (this.id !== undefined && o.change.id !== this.id) return;
    if (this.phase === 'snapshot') {
      this.pending.push(o);
      if (this.pending.length > this.conn.hub.options.maxPendingChanges)
        this.conn.close(CloseCodes.SlowConsumer, 'slow consumer: too many changes during the snapshot');
      return;
    }
    if (o.change.seq <= this.seq) return;
    this.seq = o.change.seq;
    if (this.owner === undefined) {
      this.conn.send(o.frame);
      return;
    }
    const id = o.change.id;
    const mine = o.change.data !== null && o.parsed[this.type.ownerField ?? ''] === this.owner;
    if (mine) {
      this.visible.add(id);
      this.conn.send(o.frame);
    } else if (this.visible.delete(id)) {
      // Deleted, or no longer the caller's: either way it leaves the caller's view.
      this.conn.send(objectFrame(this.type.kind, id, null));
    }
  }

  goLive() {
    this.phase = 'live';
    const held = this.pending;
    this.pending = [];
    for (const o of held) this.offer(o);
  }
}

/** One websocket. Client messages are handled one at a time, in order. */
export class Connection {
  closed = false;
  alive = true;
  /** When the API key expires (epoch ms). */
  keyUntil = Number.POSITIVE_INFINITY;
  /** When the user's suspension starts (epoch ms). */
  userUntil = Number.POSITIVE_INFINITY;
  /** When the session expires (its maximum lifetime) (epoch ms). */
  sessionUntil = Number.POSITIVE_INFINITY;
  /** When the credentials stop being valid; checked at every ping. */
  get validUntil() {
    return Math.min(this.keyUntil, this.userUntil, this.sessionUntil);
  }
  /** By Kind and ID; null for a special kind's subscription (its stop function is in `stops`). */
  readonly subscriptions = new Map<string, Subscription | null>();
  readonly stops: (() => void)[] = [];
  private queue: Promise<void> = Promise.resolve();
  private queued = 0;

  constructor(
    readonly hub: EventHub,
    readonly socket: EventSocket,
    readonly principal: Principal,
    readonly request: FastifyRequest | undefined,
  ) {
    socket.on('pong', () => {
      this.alive = true;
    });
    socket.on('message', (data, isBinary) => {
      this.alive = true;
      if (++this.queued > MAX_QUEUED_MESSAGES) {
        this.close(CloseCodes.PolicyViolation, 'too many requests waiting: wait for the answers');
        return;
      }
      const text = isBinary ? undefined : String(data);
      this.queue = this.queue
        .then(() => this.handle(text))
        .catch((err) => this.fail(err))
        .finally(() => this.queued--);
    });
    socket.on('close', () => this.detach());
  }

  /** Sends a frame unless closed; closes with 4008 when the client lets too much pile up. */
  send(data: Buffer | ListItemFrame): boolean {
    if (this.closed) return false;
    if (this.socket.bufferedAmount > this.hub.options.maxBufferedBytes) {
      this.close(CloseCodes.SlowConsumer, 'slow consumer: send buffer limit exceeded');
      return false;
    }
    this.socket.send(Buffer.isBuffer(data) ? data : JSON.stringify(data), { binary: false });
    return true;
  }

  close(code: number, reason: string) {
    if (this.closed) return;
    this.detach();
    this.socket.close(code, reason);
  }

  terminate() {
    this.detach();
    this.socket.terminate();
  }

  private detach() {
    if (this.closed) return;
    this.closed = true;
    this.hub.detach(this);
    for (const stop of this.stops.splice(0)) {
      try {
        stop();
      } catch (err) {
        this.hub.logger.warn({ err }, 'event stream: stopping a subscription failed');
      }
    }
  }

  private fail(err: unknown) {
    this.hub.logger.error({ err }, 'event stream: internal error');
    this.close(CloseCodes.Internal, 'internal error');
  }

  private async handle(text: string | undefined) {
    if (this.closed) return;
    let req: EventStreamRequest | undefined;
    let raw: { Kind?: unknown; ID?: unknown } | undefined;
    try {
      if (text === undefined) throw new StreamError(400, 'send EventStreamRequest JSON as text frames');
      try {
        raw = JSON.parse(text) as typeof raw;
      } catch {
        // parseRequest reports it
      }
      req = parseRequest(text);
      await this.subscribe(req);
    } catch (err) {
      if (!(err instanceof StreamError)) throw err;
      this.send(errorFrame(err.status, err.message, req ?? (typeof raw === 'object' ? raw : undefined)));
    }
  }

  private async subscribe(req: EventStreamRequest) {
    const special = specialKind(req.Kind);
    const type = special ? undefined : typeByKind.get(req.Kind);
    if (!special && !type) throw new StreamError(404, `unknown kind ${req.Kind}`);
    const key = `${req.Kind}\u0000${req.ID ?? ''}`;
    if (this.subscriptions.has(key)) throw new StreamError(409, 'already subscribed to this Kind and ID');
    if (this.subscriptions.size >= this.hub.options.maxSubscriptions)
      throw new StreamError(429, `at most ${this.hub.options.maxSubscriptions} subscriptions per connection`);

    if (special) {
      this.subscriptions.set(key, null);
      try {
        const stop = await special.subscribe({
          kind: req.Kind,
          id: req.ID,
          principal: this.principal,
          request: this.request as FastifyRequest,
          logger: this.hub.logger,
          service: this.hub.ctx,
          onSessionChange: (fn) => this.hub.onSessionChange(fn),
          send: (frame) => this.send({ ...frame, Kind: req.Kind }),
          caughtUp: () => this.send(markerFrame(req.Kind)),
        });
        if (this.closed) stop();
        else this.stops.push(stop);
      } catch (err) {
        this.subscriptions.delete(key);
        throw err;
      }
      return;
    }

    const t = type as ObjectType;
    const op = req.ID !== undefined || t.identity === 'singleton' ? 'get' : 'list';
    const granted = access(this.principal, t.kind, op);
    if (!granted || !t.ops.includes(op))
      throw new StreamError(403, `your credentials may not read ${t.kind} objects`);
    // Own-only access to a type without an owner field shows nothing: refuse instead.
    if (granted === 'own' && !t.ownerField)
      throw new StreamError(403, `your credentials may not read ${t.kind} objects`);
    const sub = new Subscription(this, t, req.ID, granted === 'own' ? this.principal.userId : undefined);
    this.subscriptions.set(key, sub);
    this.hub.register(sub);
    const owner = sub.owner !== undefined ? { field: t.ownerField as string, value: sub.owner } : undefined;
    const snap = await this.hub.snapshot(this.hub.ctx.db, t.kind, req.ID, owner);
    sub.seq = snap.seq;
    for (const row of snap.rows) {
      if (this.closed) return;
      if (sub.owner !== undefined) {
        const doc = JSON.parse(row.data) as Doc;
        if (doc[t.ownerField ?? ''] !== sub.owner) continue;
        sub.visible.add(row.id);
      }
      if (this.socket.bufferedAmount > this.hub.options.snapshotHighWaterBytes) await this.drained();
      this.send(objectFrame(t.kind, row.id, row.data));
    }
    if (this.closed) return;
    this.send(markerFrame(t.kind));
    sub.goLive();
  }

  /** Waits until the client has read enough of the snapshot; gives up (4008) after snapshotStallMs. */
  private async drained() {
    const { snapshotHighWaterBytes, snapshotStallMs } = this.hub.options;
    const deadline = Date.now() + snapshotStallMs;
    while (!this.closed && this.socket.bufferedAmount > snapshotHighWaterBytes) {
      if (Date.now() > deadline) {
        this.close(CloseCodes.SlowConsumer, 'slow consumer: the snapshot could not be delivered');
        return;
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  }
}

/**
 * The event hub of one service instance: the open connections, one change-log tailer for all
 * of them, keep-alive, and the hooks other parts of the service call (integrityChanged,
 * endStreams). Created once per app (src/events/routes.ts), closed with it.
 */
export class EventHub {
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
  /** Session writes of this process (the sign-in code's sessionEvents). */
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
    );
    sessionEvents.on('change', this.onLocalSession);
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
      if (p.via !== 'session' || !conn.request) continue;
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
    sessionEvents.off('change', this.onLocalSession);
    clearInterval(this.pingTimer);
    this.pingTimer = undefined;
    for (const conn of [...this.connections]) conn.terminate();
    await this.tailer.close();
  }
}

/** Whose streams count together: the user's, else the key's or the session's. */
const streamHolder = (p: Principal) =>
  p.userId !== '' ? `u:${p.userId}` : p.keyId ? `k:${p.keyId}` : `s:${p.sessionId ?? ''}`;

/** Why an updated API key no longer grants what the stream was opened with, or undefined. */
function keyStillGrants(o: Outgoing, p: Principal): string | undefined {
  if (o.change.data === null) return 'the API key was deleted';
  const doc = o.parsed;
  const scopes = new Set(Array.isArray(doc.Scopes) ? (doc.Scopes as string[]) : []);
  const same = scopes.size === p.scopes.size && [...p.scopes].every((s) => scopes.has(s));
  if (!same || String(doc.UserID ?? '') !== p.userId) return "the API key's scopes or user changed";
  if (Date.now() >= expiryOf(doc.ExpireTime)) return 'the API key expired';
  return undefined;
}

/** When a SuspendAfter starts a suspension, as epoch ms; never (Infinity) for the zero time. */
function suspensionOf(value: unknown): number {
  const t = timestampMs(String(value));
  return Number.isFinite(t) ? t : Number.POSITIVE_INFINITY;
}

/** An ExpireTime as epoch ms; never (Infinity) for the zero time. */
function expiryOf(value: unknown): number {
  const t = timestampMs(String(value));
  return Number.isFinite(t) && t > 0 ? t : Number.POSITIVE_INFINITY;
}
