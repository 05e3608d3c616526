/**
 * Slow request bodies. A client that sends its body slower than proxy.bodyminrate (averaged over
 * RATE_WINDOW_S), or sends nothing for proxy.bodytimeout, is cut off with 408. Bodies are read
 * into the proxy up to BODY_BUFFER_BYTES before an upstream connection is taken, so a trickling
 * client holds memory here, bounded, and never an upstream connection (the pool has a few hundred
 * per upstream: a few hundred tricklers would otherwise lock every user out). A longer body is
 * streamed once its first part came fast enough, and is still watched while it streams.
 * One timer per proxy ticks over all watched bodies (no timer per request).
 */
import type { IncomingMessage } from 'node:http';
import { PassThrough, type Readable } from 'node:stream';
import { type HttpError, proxyError } from './errorcodes.js';

/** How much of a body is read before an upstream connection is taken. */
export const BODY_BUFFER_BYTES = 64 * 1024;
/** The minimum rate is averaged over this many seconds. */
export const RATE_WINDOW_S = 10;

export interface BodyLimits {
  /** Bytes per second at least, over RATE_WINDOW_S; 0: no minimum. */
  minRate: number;
  /** Longest time without any byte (ms). */
  stallMs: number;
}

/** One body being watched. */
class Watched {
  /** Bytes per tick over the last RATE_WINDOW_S ticks (a ring). */
  readonly ticks = new Array<number>(RATE_WINDOW_S).fill(0);
  at = 0;
  current = 0;
  received = 0;
  /** Seconds watched while the body was flowing (the rate is judged only after a whole window). */
  age = 0;
  lastByte = Date.now();
  /** When the current one-second bucket of the rate began. */
  secondAt = Date.now();

  constructor(
    readonly req: IncomingMessage,
    readonly length: number | undefined,
    readonly limits: BodyLimits,
    readonly onSlow: (e: HttpError) => void,
  ) {}

  /** Why this body is too slow now, or undefined. */
  judge(now: number): string | undefined {
    // Paused by the proxy (the upstream is not reading): the client is not the slow one.
    if (this.req.readableFlowing === false) {
      this.lastByte = now;
      this.age = 0;
      this.ticks.fill(0);
      this.current = 0;
      this.secondAt = now;
      return undefined;
    }
    if (now - this.lastByte > this.limits.stallMs)
      return `nothing of the request body came for ${this.limits.stallMs / 1000} s`;
    if (now - this.secondAt < 1000) return undefined;
    this.secondAt = now;
    this.ticks[this.at] = this.current;
    this.at = (this.at + 1) % RATE_WINDOW_S;
    this.current = 0;
    if (this.limits.minRate > 0 && ++this.age >= RATE_WINDOW_S) {
      let inWindow = 0;
      for (const n of this.ticks) inWindow += n;
      // A body shorter than a window's worth must be complete within a window.
      const remaining =
        this.length === undefined ? Number.POSITIVE_INFINITY : this.length - this.received + inWindow;
      const need = Math.min(this.limits.minRate * RATE_WINDOW_S, remaining);
      if (inWindow < need)
        return `the request body came slower than ${this.limits.minRate} bytes/s (${inWindow} bytes in ${RATE_WINDOW_S} s)`;
    }
    return undefined;
  }
}

export class BodyWatch {
  private readonly watched = new Set<Watched>();
  private timer: NodeJS.Timeout | undefined;

  /** `tickMs`: how often bodies are looked at (a quarter of the stall bound, at most a second). */
  constructor(private readonly tickMs = 1_000) {}

  /**
   * Reads the first BODY_BUFFER_BYTES of a body (all of a shorter one) at an acceptable rate, and
   * gives the whole body as a stream: the part read, then the rest from the client. Rejects with
   * 408 when the client is too slow (nothing has been sent anywhere yet), 400 when it goes away.
   * `onSlowLater` is called if the rest turns out too slow while it streams.
   */
  gate(
    req: IncomingMessage,
    length: number | undefined,
    limits: BodyLimits,
    onSlowLater: (e: HttpError) => void,
  ): Promise<Readable> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let settled = false;
      let slowHandler: (e: HttpError) => void = (e) => finish(e);
      const w = new Watched(req, length, limits, (e) => slowHandler(e));
      this.add(w);
      const onData = (c: Buffer) => {
        w.current += c.length;
        w.received += c.length;
        w.lastByte = Date.now();
        if (settled) return;
        chunks.push(c);
        size += c.length;
        if (size >= BODY_BUFFER_BYTES) finish(undefined);
      };
      const onEnd = () => {
        this.watched.delete(w);
        if (!settled) finish(undefined, true);
      };
      const onClose = () => {
        this.watched.delete(w);
        if (!settled) finish(proxyError('BodyCutOff'));
      };
      const finish = (e: HttpError | undefined, ended = false) => {
        settled = true;
        if (e) {
          this.watched.delete(w);
          req.off('data', onData);
          req.pause();
          return reject(e);
        }
        const body = new PassThrough();
        for (const c of chunks) body.write(c);
        chunks.length = 0;
        if (ended) {
          body.end();
          req.off('data', onData);
        } else {
          slowHandler = (err) => {
            this.watched.delete(w);
            req.unpipe(body);
            req.off('data', onData);
            onSlowLater(err);
          };
          req.pipe(body);
        }
        resolve(body);
      };
      req.on('data', onData);
      req.once('end', onEnd);
      req.once('close', onClose);
    });
  }

  private add(w: Watched) {
    this.watched.add(w);
    if (!this.timer) {
      this.timer = setInterval(() => this.tick(), this.tickMs);
      this.timer.unref();
    }
  }

  private tick() {
    const now = Date.now();
    for (const w of this.watched) {
      const why = w.judge(now);
      if (why) {
        this.watched.delete(w);
        w.onSlow(proxyError('BodyTooSlow', why));
      }
    }
    if (this.watched.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  get size() {
    return this.watched.size;
  }

  close() {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.watched.clear();
  }
}
