import { EventEmitter } from 'node:events';
import WebSocket from 'ws';
import type { ListItemFrame } from '../../src/events/protocol.js';

/** A test client of GET /events that records every frame and the close. */
export class EventClient {
  readonly frames: ListItemFrame[] = [];
  closed: { code: number; reason: string } | undefined;
  private waiters: (() => void)[] = [];

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      this.frames.push(JSON.parse(String(data)) as ListItemFrame);
      this.notify();
    });
    ws.on('close', (code, reason) => {
      this.closed = { code, reason: String(reason) };
      this.notify();
    });
    ws.on('error', () => {});
  }

  static open(
    baseUrl: string,
    key: string | undefined,
    opts: WebSocket.ClientOptions & { query?: boolean } = {},
  ): Promise<EventClient> {
    const { query, ...wsOpts } = opts;
    const url = `${baseUrl.replace(/^http/, 'ws')}/events${key && query ? `?access_token=${key}` : ''}`;
    const headers: Record<string, string> = key && !query ? { authorization: `Bearer ${key}` } : {};
    const ws = new WebSocket(url, { headers, ...wsOpts });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new EventClient(ws)));
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (c: Buffer) => {
          body += c;
        });
        res.on('end', () => reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { res, body })));
      });
      ws.once('error', reject);
    });
  }

  send(msg: unknown) {
    this.ws.send(typeof msg === 'string' ? msg : JSON.stringify(msg));
  }

  private notify() {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Waits until `pred` holds over the frames (or the close), or fails after `ms`. */
  async until(pred: (c: EventClient) => boolean, ms = 5000, what = 'condition'): Promise<void> {
    const deadline = Date.now() + ms;
    while (!pred(this)) {
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(
          `timed out waiting for ${what}; frames: ${JSON.stringify(this.frames).slice(0, 2000)}`,
        );
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  /** Waits for `n` frames in total and returns them. */
  async count(n: number, ms?: number): Promise<ListItemFrame[]> {
    await this.until((c) => c.frames.length >= n, ms, `${n} frames`);
    return this.frames.slice(0, n);
  }

  /** Waits for the catch-up marker of `kind` and returns the frames of that kind before it. */
  async caughtUp(kind: string, ms?: number): Promise<ListItemFrame[]> {
    await this.until((c) => c.markerIndex(kind) >= 0, ms, `marker of ${kind}`);
    const i = this.markerIndex(kind);
    return this.frames.slice(0, i).filter((f) => f.Kind === kind);
  }

  markerIndex(kind: string) {
    return this.frames.findIndex((f) => f.Kind === kind && f.ID === '' && f.StatusCode === undefined);
  }

  async waitClose(ms?: number) {
    await this.until((c) => c.closed !== undefined, ms, 'close');
    return this.closed as { code: number; reason: string };
  }

  close() {
    this.ws.close();
  }
}

/** A socket whose send buffer the test controls: it never drains unless told to. */
export class FakeSocket extends EventEmitter {
  bufferedAmount = 0;
  readyState = 1;
  sent: string[] = [];
  closedWith: { code: number; reason: string } | undefined;
  send(data: Buffer | string) {
    this.sent.push(String(data));
  }
  close(code: number, reason: string) {
    this.closedWith = { code, reason };
    this.readyState = 3;
  }
  terminate() {
    this.readyState = 3;
  }
  ping() {}
  /** A client message. */
  message(obj: unknown) {
    this.emit('message', Buffer.from(JSON.stringify(obj)), false);
  }
}
