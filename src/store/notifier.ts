import type pg from 'pg';
import { CHANGES_CHANNEL, type PendingChange } from './pgwrite.js';

/**
 * Announces committed writes to the other instances: a NOTIFY on CHANGES_CHANNEL, sent after
 * COMMIT on a connection of its own. PostgreSQL serializes every committing transaction that sent
 * a NOTIFY, from before its commit record to its end, WAL flush included, so a NOTIFY inside the
 * write made the writes of every instance commit one at a time (docs/benchmarks.md, "Prepared
 * statements and commits side by side").
 *
 * A write whose changes other instances keep caches of (ObjectType.cachedElsewhere: API keys,
 * users, scripts, the tenant) is answered only once its NOTIFY has committed, as when the NOTIFY
 * was part of it: a client told that a key is deleted finds it refused by every listening
 * instance (their caches drop it when the notification arrives, src/auth/keycache.ts). Other
 * writes are answered at once and announced within LAZY_NOTIFY_MS, together with whatever else
 * commits meanwhile: their only readers elsewhere are event streams, and a NOTIFY is a
 * transaction of its own, with its WAL flush, plus a wake-up of every listening instance.
 *
 * One NOTIFY is in flight per store at a time. Writes that commit meanwhile are announced together
 * by the next one, with the kinds they updated or deleted and the kinds they created merged: under
 * load the other instances are woken once per round trip rather than once per write. The payload
 * names the writing store (`writer`), so an instance's own tailer can tell its own commits
 * (already announced in-process) from other instances'. It also names each object the writes
 * updated or deleted (`o`, alteredObject keys), up to MAX_NOTICE_OBJECTS: a cache elsewhere then
 * drops what depends on those objects only, as it does for its own instance's writes. Past that
 * many, `o` is left out and the caches of those kinds drop everything.
 *
 * A NOTIFY that fails (the database went away right after the commit) does not fail the writes it
 * announced, which committed: the next NOTIFY names their kinds too, and until then the other
 * instances' tailers find the changes by their poll and their caches drop entries by age.
 */
export class CommitNotifier {
  private updated = new Set<string>();
  private created = new Set<string>();
  /** The objects updated or deleted since the last NOTIFY; undefined once there were too many to name. */
  private altered: Set<string> | undefined = new Set();
  /** Writes committed since the last NOTIFY was sent. */
  private unannounced = false;
  /** The writes waiting for the next NOTIFY. */
  private waiting: (() => void)[] = [];
  private sending: Promise<void> | undefined;
  private later: NodeJS.Timeout | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly writer: string,
  ) {}

  /**
   * A write committed with these changes. `prompt`: other instances cache what it changed; the
   * promise resolves once a NOTIFY naming them has been sent (or failed). Otherwise it resolves at
   * once, and the NOTIFY follows within LAZY_NOTIFY_MS.
   */
  committed(changes: readonly PendingChange[], prompt: boolean): Promise<void> {
    for (const ch of changes) {
      if (ch.object === 'insert') this.created.add(ch.type);
      else {
        this.updated.add(ch.type);
        this.alter(alteredObject(ch.type, ch.id));
      }
    }
    this.unannounced = true;
    if (!prompt) {
      if (!this.sending && !this.later) {
        this.later = setTimeout(this.sendNow, LAZY_NOTIFY_MS);
        this.later.unref();
      }
      return Promise.resolve();
    }
    const told = new Promise<void>((resolve) => this.waiting.push(resolve));
    this.sendNow();
    return told;
  }

  private readonly sendNow = () => {
    clearTimeout(this.later);
    this.later = undefined;
    this.sending ??= this.send();
  };

  /** Resolves once every write committed so far has been announced (or its NOTIFY failed). */
  async settled(): Promise<void> {
    if (this.later) this.sendNow();
    while (this.sending) await this.sending;
  }

  /** Names one more altered object, or stops naming them once there are too many. */
  private alter(object: string) {
    if (!this.altered) return;
    this.altered.add(object);
    if (this.altered.size > MAX_NOTICE_OBJECTS) this.altered = undefined;
  }

  private async send() {
    while (this.unannounced) {
      const updated = this.updated;
      const created = this.created;
      const altered = this.altered;
      const waiting = this.waiting;
      this.updated = new Set();
      this.created = new Set();
      this.altered = new Set();
      this.waiting = [];
      this.unannounced = false;
      const payload = JSON.stringify({
        w: this.writer,
        u: [...updated],
        c: [...created],
        ...(altered ? { o: [...altered] } : {}),
      });
      try {
        await this.pool.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, payload]);
      } catch {
        // Named again by the next notification.
        for (const k of updated) this.updated.add(k);
        for (const k of created) this.created.add(k);
        if (altered) for (const o of altered) this.alter(o);
        else this.altered = undefined;
      }
      for (const done of waiting) done();
    }
    this.sending = undefined;
  }
}

/** How ObjectStore.onAltered and change notices name an object: its kind, a space, its id. */
export const alteredObject = (kind: string, id: string) => `${kind} ${id}`;

/**
 * The most objects a notice names. Each takes about 30 bytes of a payload PostgreSQL caps at
 * 8,000; a notice announcing more writes than this (a bulk import) names kinds only.
 */
export const MAX_NOTICE_OBJECTS = 100;

/**
 * How long a write that no other instance caches anything of waits at most to be announced: long
 * enough that under load one NOTIFY announces many writes, short against an event stream's
 * latency.
 */
export const LAZY_NOTIFY_MS = 5;

/**
 * A change notification read back: undefined when it is not one of ours (then: drop everything).
 * `altered`: every object the announced writes updated or deleted, or undefined when the notice
 * does not name them (then: drop everything of the `updated` kinds).
 */
export function readChangeNotice(
  payload: string,
): { writer: string; updated: Set<string>; created: Set<string>; altered?: Set<string> } | undefined {
  try {
    const p = JSON.parse(payload) as { w?: unknown; u?: unknown; c?: unknown; o?: unknown };
    if (typeof p.w !== 'string' || !Array.isArray(p.u) || !Array.isArray(p.c)) return undefined;
    return {
      writer: p.w,
      updated: new Set(p.u.map(String)),
      created: new Set(p.c.map(String)),
      ...(Array.isArray(p.o) ? { altered: new Set(p.o.map(String)) } : {}),
    };
  } catch {
    return undefined;
  }
}
