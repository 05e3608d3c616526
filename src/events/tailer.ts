import pg from 'pg';
import type { Logger } from 'pino';
import { oldestOpenTransaction } from '../store/changelog.js';
import { isAfter, LOG_START, type LogPosition } from '../store/logposition.js';
import { readChangeNotice } from '../store/notifier.js';
import { CHANGES_CHANNEL, type Change, type ObjectStore } from '../store/objects.js';
import { SupersededChanges } from './superseded.js';

/** While nobody listens, how often at most the position follows the log (one query each time). */
const IDLE_FOLLOW_MS = 1000;

/**
 * Committed changes wait behind an older transaction still running (src/store/logposition.ts):
 * read again after this long, doubling while they still wait, up to HORIZON_RETRY_MAX_MS. Most
 * such transactions are other writes that end within milliseconds; their own commits wake the
 * tailer too.
 */
const HORIZON_RETRY_MS = 2;
const HORIZON_RETRY_MAX_MS = 250;
/** Changes waiting this long behind a running transaction are logged, with that transaction. */
const HORIZON_WARN_MS = 10_000;

/** NOTIFY channel for stream signals between instances (src/events/hub.ts: sessionIntegrityChanged...). */
export const SIGNALS_CHANNEL = 'gatehouse_event_signals';

export interface TailerOptions {
  /** Safety-net poll of the change log, for a missed notification or another process on SQLite. */
  pollIntervalMs: number;
  /** Rows read per query. */
  batchSize: number;
  /** After how long changes waiting behind a running transaction are logged (default 10 s). */
  horizonWarnMs?: number;
}

/**
 * The one reader of the change log in this process. It keeps a position (the place in the log of
 * the last change delivered, src/store/logposition.ts) and, whenever woken, reads every change
 * after it in log order and hands each batch to `deliver` synchronously, then advances.
 * Wake-ups: the store's in-process 'commit' event, PostgreSQL NOTIFY on CHANGES_CHANNEL (writes
 * of other processes), and a slow poll, so a lost notification only delays a change, never
 * loses it.
 *
 * Subscribers that register between two deliveries receive every change after `position`;
 * together with a snapshot read after registering (src/events/snapshot.ts), which saw every change
 * delivered before, that leaves no gap and, after dropping the changes the snapshot saw, no
 * duplicate.
 */
export class ChangeTailer {
  /** Every change up to here has been delivered. */
  position: LogPosition = LOG_START;
  private started: Promise<void> | undefined;
  private reading = false;
  private again = false;
  private closed = false;
  private pollTimer: NodeJS.Timeout | undefined;
  private listener: pg.Client | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private reconnectDelay = 500;
  /** Older versions of objects that come after their newer ones in the log (src/events/superseded.ts). */
  readonly superseded = new SupersededChanges();

  constructor(
    private readonly store: ObjectStore,
    private readonly deliver: (changes: Change[]) => void,
    /** True when nobody listens: the tailer then only moves its position, reading no rows. */
    private readonly idle: () => boolean,
    private readonly logger: Logger,
    private readonly options: TailerOptions,
    /** Payloads NOTIFYed on SIGNALS_CHANNEL by any instance (this one included). */
    private readonly onSignal: (payload: string) => void = () => {},
    /**
     * Changes after the position were pruned before this tailer read them (src/store/changelog.ts):
     * whoever relied on seeing every change must start again from a snapshot.
     */
    private readonly onGap: () => void = () => {},
    /**
     * The LISTEN connection is back after it was lost (or first came up late): signals NOTIFYed
     * meanwhile were missed, and unlike changes they are in no log to read again.
     */
    private readonly onRelisten: () => void = () => {},
  ) {}

  /** Idempotent; resolves once the position is known and wake-ups are wired. A failed start is tried again by the next call. */
  start(): Promise<void> {
    this.started ??= this.init().catch((err: unknown) => {
      this.started = undefined;
      throw err;
    });
    return this.started;
  }

  private listenedBefore = false;

  private async init() {
    const position = await this.store.lastPosition();
    if (this.closed) return;
    this.position = position;
    this.store.commits.on('commit', this.wake);
    // Not a service job (src/core/jobs.ts): the tailer's safety-net poll is started and stopped
    // by the tailer itself, which its hub owns, and runs only while it is open.
    this.pollTimer = setInterval(this.poll, this.options.pollIntervalMs);
    this.pollTimer.unref();
    if (this.store.db.dialect === 'postgres') await this.listen();
  }

  /** Changes the safety-net poll interval (tests; tuning). */
  setPollInterval(ms: number) {
    this.options.pollIntervalMs = ms;
    if (this.pollTimer) {
      clearInterval(this.pollTimer);
      this.pollTimer = setInterval(this.poll, ms);
      this.pollTimer.unref();
    }
  }

  /** The safety-net poll: read the log, and check that the LISTEN connection still answers. */
  private readonly poll = () => {
    this.wake();
    void this.checkListener();
  };

  private checkingListener = false;

  /**
   * A network cut leaves the LISTEN socket open and silent: notifications stop with no error.
   * A statement on it that goes unanswered (the pool's query_timeout) replaces the connection.
   */
  private async checkListener() {
    const client = this.listener;
    if (!client || this.checkingListener || this.closed) return;
    this.checkingListener = true;
    try {
      await client.query('SELECT 1');
    } catch (err) {
      if (this.listener === client && !this.closed) {
        this.logger.warn({ err }, 'event stream: LISTEN connection does not answer; reconnecting');
        (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
        this.relisten(client);
      }
    } finally {
      this.checkingListener = false;
    }
  }

  /** Reads the change log now (or right after the read in progress). */
  readonly wake = () => {
    if (this.closed) return;
    if (this.reading) {
      this.again = true;
      return;
    }
    void this.drain();
  };

  private idleFollowedAt = 0;
  /** The position was left behind while idle (IDLE_FOLLOW_MS). */
  private idleBehind = false;
  private idleTimer: NodeJS.Timeout | undefined;

  private async drain() {
    this.reading = true;
    try {
      do {
        this.again = false;
        if (this.idle()) {
          // With nobody listening the position only follows the log, at most once per
          // IDLE_FOLLOW_MS: not a query per write. A first subscriber may then be offered changes
          // older than its snapshot, which it drops (src/events/subscription.ts).
          const wait = this.idleFollowedAt + IDLE_FOLLOW_MS - Date.now();
          if (wait > 0) {
            this.idleTimer ??= setTimeout(() => {
              this.idleTimer = undefined;
              this.wake();
            }, wait);
            this.idleTimer.unref();
            this.idleBehind = true;
            continue;
          }
          this.idleFollowedAt = Date.now();
          const last = await this.store.lastPosition();
          // Someone may have subscribed during the query: they need the rows, so read them.
          if (this.idle()) {
            if (isAfter(last, this.position)) this.position = last;
            this.superseded.clear();
            this.idleBehind = false;
            continue;
          }
        }
        for (;;) {
          const {
            changes: batch,
            waiting,
            pruned,
            committedBelow,
          } = await this.store.changesAfter(this.position, this.options.batchSize);
          if (waiting) this.retryBehindHorizon();
          else {
            this.horizonDelay = HORIZON_RETRY_MS;
            this.waitingSince = undefined;
          }
          if (this.closed || batch.length === 0) break;
          // Changes after the position were deleted by the pruner before this tailer read them.
          // Behind only from an idle spell, no subscriber can have lost anything: each registered
          // after it and reads from a snapshot newer than any row pruned (older than the retention).
          const behind = this.idleBehind;
          this.idleBehind = false;
          if (!behind && isAfter(pruned, this.position)) {
            this.logger.warn(
              { position: this.position, pruned },
              'event stream: changes were pruned before they were read; subscribers resync',
            );
            this.onGap();
          }
          const last = batch[batch.length - 1] as Change;
          this.position = { tx: last.tx, seq: last.seq };
          const current = this.superseded.filter(batch, committedBelow);
          this.superseded.passed(this.position);
          if (current.length > 0) this.deliver(current);
          if (batch.length < this.options.batchSize || waiting) break;
        }
      } while (this.again && !this.closed);
    } catch (err) {
      // The next wake-up or poll retries from the same position.
      if (!this.closed) this.logger.warn({ err }, 'event stream: reading the change log failed');
    } finally {
      this.reading = false;
    }
  }

  private horizonDelay = HORIZON_RETRY_MS;
  private horizonTimer: NodeJS.Timeout | undefined;

  /** Since when committed changes have waited behind a running transaction (undefined: they do not). */
  private waitingSince: number | undefined;
  private warnedAbout: number | undefined;

  /** Reads again soon: committed changes wait behind an older transaction still running. */
  private retryBehindHorizon() {
    const now = Date.now();
    this.waitingSince ??= now;
    const waited = now - this.waitingSince;
    if (waited >= (this.options.horizonWarnMs ?? HORIZON_WARN_MS)) {
      // Looked at again after as long, while they keep waiting.
      this.waitingSince = now;
      void this.reportOpenTransaction(waited);
    }
    if (this.horizonTimer || this.closed) return;
    this.horizonTimer = setTimeout(() => {
      this.horizonTimer = undefined;
      this.wake();
    }, this.horizonDelay);
    this.horizonTimer.unref();
    this.horizonDelay = Math.min(this.horizonDelay * 2, HORIZON_RETRY_MAX_MS);
  }

  /**
   * Changes have waited long: name the transaction they wait for, once per transaction, so an
   * operator can end it (docs/scaling.md, "Failure modes").
   */
  private async reportOpenTransaction(waitedMs: number) {
    try {
      const open = await oldestOpenTransaction(this.store.db);
      if (!open || open.pid === this.warnedAbout) return;
      this.warnedAbout = open.pid;
      this.logger.warn(
        { transaction: open, waitedMs },
        'event stream: changes wait for a transaction still open on the PostgreSQL server',
      );
    } catch (err) {
      this.logger.warn(
        { err },
        'event stream: changes wait for a running transaction; it could not be named',
      );
    }
  }

  /** A dedicated connection LISTENing for commits of every process sharing the database. */
  private async listen() {
    const pool = this.store.db.pool;
    if (!pool || this.closed) return;
    const client = new pg.Client(pool.options);
    this.listener = client;
    client.on('notification', (msg) => {
      if (msg.channel === SIGNALS_CHANNEL) this.onSignal(msg.payload ?? '');
      else {
        const notice = readChangeNotice(msg.payload ?? '');
        // This process's own commit: its 'commit' event has woken the readers already, and its
        // caches follow it; a second wake-up would only cost queries on the write path.
        if (notice?.writer === this.store.notifyTag) return;
        // Another instance committed: caches of this process (e.g. validated API keys) drop what
        // that write can have made stale (the objects it updated or deleted, or all of the kinds
        // it updated, deleted or created); all of it when the notice does not say.
        this.store.commits.emit('remote', notice?.updated, notice?.created, notice?.altered);
        this.wake();
      }
    });
    client.on('error', (err) => {
      if (!this.closed) this.logger.warn({ err }, 'event stream: LISTEN connection failed; reconnecting');
      this.relisten(client);
    });
    client.on('end', () => this.relisten(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANGES_CHANNEL}`);
      await client.query(`LISTEN ${SIGNALS_CHANNEL}`);
      this.reconnectDelay = 500;
      // Notifications sent while not listening are lost: read once to pick up their changes, and
      // let the hub check again what only signals tell (sessions ended on other instances).
      this.wake();
      if (this.listenedBefore) this.onRelisten();
      this.listenedBefore = true;
    } catch (err) {
      if (!this.closed) this.logger.warn({ err }, 'event stream: cannot LISTEN; polling until it can');
      // Whoever opened a stream meanwhile missed signals until the LISTEN comes up.
      this.listenedBefore = true;
      this.relisten(client);
    }
  }

  private relisten(client: pg.Client) {
    if (this.closed || this.listener !== client || this.reconnectTimer) return;
    this.listener = undefined;
    client.removeAllListeners('notification');
    client.end().catch(() => {});
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.listen();
    }, this.reconnectDelay);
    this.reconnectTimer.unref();
    this.reconnectDelay = Math.min(this.reconnectDelay * 2, 30_000);
  }

  async close() {
    this.closed = true;
    this.store.commits.off('commit', this.wake);
    clearInterval(this.pollTimer);
    clearTimeout(this.idleTimer);
    clearTimeout(this.horizonTimer);
    clearTimeout(this.reconnectTimer);
    const l = this.listener;
    this.listener = undefined;
    if (l) await l.end().catch(() => {});
  }
}
