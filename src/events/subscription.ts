import type { Doc } from '../schema/fields.js';
import type { ObjectType } from '../schema/type.js';
import { type LogSnapshot, SAW_NOTHING, sawChange } from '../store/logposition.js';
import type { Change } from '../store/objects.js';
import { CloseCodes, objectFrame } from './protocol.js';
import type { EventHubOptions } from './types.js';

/** What a subscription uses of its connection (Connection, src/events/connection.ts). */
export interface SubscriberConnection {
  readonly hub: { readonly options: EventHubOptions };
  send(data: Buffer): boolean;
  close(code: number, reason: string): void;
}

/** A change as fanned out: its frame is built once, on first use, and shared by every subscriber. */
export class Outgoing {
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
export class Subscription {
  /** 'snapshot' until the snapshot and marker are sent; changes are held in `pending` meanwhile. */
  phase: 'snapshot' | 'live' = 'snapshot';
  pending: Outgoing[] = [];
  /** The changes the snapshot already reflects (dropped when the tailer delivers them). */
  saw: LogSnapshot = SAW_NOTHING;
  /** With own-only access: the IDs the subscriber has been shown (to report them leaving). */
  readonly visible = new Set<string>();

  constructor(
    readonly conn: SubscriberConnection,
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
    if (sawChange(this.saw, o.change)) return;
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
