import type { FastifyRequest } from 'fastify';
import type { Principal } from '../auth/principal.js';
import { typeByKind } from '../objects/registry.js';
import { access } from '../policy/grants.js';
import type { Doc } from '../schema/fields.js';
import type { ObjectType } from '../schema/type.js';
import type { ServiceContext } from '../store/service.js';
import { specialKind } from './kinds.js';
import {
  CloseCodes,
  type EventStreamRequest,
  errorFrame,
  type ListItemFrame,
  markerFrame,
  objectFrame,
  parseRequest,
  StreamError,
} from './protocol.js';
import type { takeSnapshot } from './snapshot.js';
import type { ObjectChange, SessionChange } from './special.js';
import { Subscription } from './subscription.js';
import type { EventHubOptions, EventSocket } from './types.js';

/** Client messages waiting to be handled on one connection before it is closed with 1008. */
export const MAX_QUEUED_MESSAGES = 256;

/** What a connection uses of its hub (EventHub, src/events/hub.ts, which creates it). */
export interface ConnectionHub {
  readonly options: EventHubOptions;
  readonly logger: ServiceContext['logger'];
  readonly ctx: ServiceContext;
  /** How subscriptions read their snapshot. */
  snapshot: typeof takeSnapshot;
  onSessionChange(fn: (ev: SessionChange) => Promise<void>): () => void;
  onObjectChange(fn: (ev: ObjectChange) => void): () => void;
  register(sub: Subscription): void;
  detach(conn: Connection): void;
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
    readonly hub: ConnectionHub,
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
          onObjectChange: (fn) => this.hub.onObjectChange(fn),
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
    sub.saw = snap.saw;
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
