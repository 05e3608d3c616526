/**
 * The console's live lists: one websocket to GET /events (docs/events.md) with a subscription
 * per kind the views use. Each kind keeps what the stream said last (snapshot, catch-up marker,
 * then changes), so a change made elsewhere appears in every view without a reload. A closed
 * stream (a new integrity level, a restart, a reset) reconnects within a bounded wait and
 * resubscribes; the fresh snapshot replaces what was held.
 */
import { useEffect, useState } from 'preact/hooks';
import { call, type Doc, type Reply, seg, signInAgain } from './api.js';
import { navigate } from './ui.js';

interface KindState {
  items: Map<string, Doc>;
  /** Items of the snapshot being received after a reconnect, until its marker. */
  incoming: Map<string, Doc> | undefined;
  ready: boolean;
  listeners: Set<() => void>;
  /** Bumped on every change: views compare it to know they must draw again. */
  version: number;
}

const MAX_WAIT_MS = 10_000;

class LiveStream {
  private ws: WebSocket | undefined;
  private readonly kinds = new Map<string, KindState>();
  private wait = 500;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private started = false;
  /** Handshakes refused in a row: after a few, the console asks whether the session still holds. */
  private refused = 0;

  /** Opens the stream (after the step-up: the handshake needs the admin level). */
  start() {
    if (this.started) return;
    this.started = true;
    this.connect();
  }

  /** Reconnects now (after a step-up raised the session: the stream sends 100 and closes anyway). */
  restart() {
    if (!this.started) return this.start();
    this.ws?.close();
  }

  private connect() {
    const ws = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/events`);
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this.refused = 0;
      this.wait = 500;
      for (const [kind, st] of this.kinds) {
        st.incoming = new Map();
        ws.send(JSON.stringify({ Kind: kind }));
      }
    };
    ws.onmessage = (ev) => this.frame(String(ev.data));
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = undefined;
      if (!opened && ++this.refused >= 3) void this.checkSession();
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.connect(), this.wait);
      this.wait = Math.min(this.wait * 2, MAX_WAIT_MS);
    };
  }

  /** A stream refused again and again: a session that has ended goes back to sign in. */
  private async checkSession() {
    const r = await call<{ Authorized?: boolean }>('POST', '/auth').catch(() => undefined);
    if (r && r.data?.Authorized !== true) signInAgain();
  }

  private frame(text: string) {
    let f: { ID?: string; Item?: Doc; Kind?: string; StatusCode?: number };
    try {
      f = JSON.parse(text);
    } catch {
      return;
    }
    if (f.StatusCode !== undefined || !f.Kind) return; // status frames: the close that follows reconnects
    const st = this.kinds.get(f.Kind);
    if (!st) return;
    const id = f.ID ?? '';
    if (id === '') {
      if (st.incoming) st.items = st.incoming;
      st.incoming = undefined;
      st.ready = true;
    } else {
      const target = st.incoming ?? st.items;
      if (f.Item && Object.keys(f.Item).length > 0) target.set(id, f.Item);
      else target.delete(id);
      if (st.incoming) return;
    }
    st.version++;
    for (const l of st.listeners) l();
  }

  /** Follows a kind: `listener` runs after each change of it. Returns the unsubscribe. */
  follow(kind: string, listener: () => void): () => void {
    let st = this.kinds.get(kind);
    if (!st) {
      st = { items: new Map(), incoming: new Map(), ready: false, listeners: new Set(), version: 0 };
      this.kinds.set(kind, st);
      if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ Kind: kind }));
    }
    st.listeners.add(listener);
    return () => st.listeners.delete(listener);
  }

  state(kind: string): KindState | undefined {
    return this.kinds.get(kind);
  }

  /**
   * Resolves once the object `id` of `kind` is on the stream, or after `ms`: a view opened right
   * after its object was created finds it there. The answer to a create can arrive before the
   * stream's frame of it; the view would say "No such ...".
   */
  arrival(kind: string, id: string, ms = 5000): Promise<void> {
    return new Promise((resolve) => {
      const there = () => this.kinds.get(kind)?.items.has(id) === true;
      if (there()) return resolve();
      const done = () => {
        clearTimeout(timer);
        stop();
        resolve();
      };
      const timer = setTimeout(done, ms);
      const stop = this.follow(kind, () => {
        if (there()) done();
      });
    });
  }
}

// module-state: one event stream per console page, shared by every view.
export const live = new LiveStream();

/**
 * Opens the view of an object just created of `kind`, from the answer `r` to its POST on
 * /`collection`, once the stream holds it (LiveStream.arrival): every create view goes this way.
 */
export async function openCreated(kind: string, collection: string, r: Reply): Promise<void> {
  const id = r.headers.get('x-id') ?? '';
  await live.arrival(kind, id);
  navigate(`/console/${collection}/${seg(id)}`);
}

export interface LiveList {
  items: Doc[];
  ready: boolean;
  byId: Map<string, Doc>;
}

/** The objects of a kind as the stream holds them now; the view draws again on every change. */
export function useLive(kind: string): LiveList {
  const [, setVersion] = useState(0);
  useEffect(() => live.follow(kind, () => setVersion((v) => v + 1)), [kind]);
  const st = live.state(kind);
  const byId = st?.items ?? new Map<string, Doc>();
  return { items: [...byId.values()], ready: st?.ready ?? false, byId };
}
