import { EventEmitter } from 'node:events';
import { sql } from 'kysely';
import { nowStamp } from '../groups/lifecycle.js';
import { f } from '../schema/fields.js';
import type { ObjectType } from '../schema/type.js';
import type { AuditRow as WriteAuditRow } from '../store/auditrow.js';
import type { Db } from '../store/db.js';
import { fixedQuery } from '../store/fixed.js';
import type { ListQuery } from '../store/listquery.js';
import { type ListPage, listObjects } from '../store/listread.js';
import { LOG_START, type LogPosition } from '../store/logposition.js';
import { newId } from '../store/objects.js';
import { perService, type ServiceContext, stateOf } from '../store/service.js';

/**
 * One entry of the audit trail (docs/directory.md, "Audit trail"): who made a write request, by
 * which credential, from where, and how it was answered. Not an object type of the registry (it is
 * not in the objects table and cannot be written through the API); declared like one so lists
 * take the same options (filter, order, limit, cursors) and the event stream the same frames.
 */
export const AuditEntry: ObjectType = {
  kind: 'AuditEntry',
  path: 'audit',
  identity: 'generated',
  ops: ['list'],
  fields: {
    ID: f.string({ readOnly: true }),
    Time: f.timestamp({ doc: 'When the request was answered (whole seconds)' }),
    TimeMs: f.integer({ doc: 'The same, in milliseconds since 1970, to order entries within a second' }),
    Method: f.string(),
    Route: f.string({ doc: 'The route pattern, e.g. /users/:id' }),
    Path: f.string({ doc: 'The path requested, without the query (which may hold an access_token)' }),
    Kind: f.string({ doc: 'Object type of the route, when it is one (User, Group, ...)' }),
    ObjectID: f.string({ doc: 'The :id of the route, or the ID of the object a create made' }),
    Rule: f.string({
      doc: 'The policy rule that refused the request (docs/security.md), when one did; empty otherwise',
    }),
    Status: f.integer(),
    Via: f.enum(['apikey', 'session', 'agent', 'none'], { doc: 'How the caller proved who it is' }),
    UserID: f.string({ doc: 'The user acted for (empty: none)' }),
    KeyID: f.string({ doc: 'The API key, when one was used' }),
    SessionID: f.string({ doc: 'The session, when one was used' }),
    AgentAppID: f.string({
      doc: "An agent's or proxy's App (its proxy token), when one was used and accepted",
    }),
    Address: f.string({ doc: 'Client address as the service determined it (server.trustproxy)' }),
    UserAgent: f.string(),
    RequestID: f.string({ doc: 'X-Request-Id of the response: the service log lines of the request' }),
  },
};

export type AuditRecord = Record<string, string | number>;

/**
 * Emits 'recorded' after each entry this service appends (its event stream wakes at once); the
 * bus is the service's (src/store/service.ts), so another service in the process is not woken.
 */
const AUDIT_EVENTS = perService<EventEmitter, Pick<ServiceContext, 'state'>>('audit events', () => {
  const bus = new EventEmitter();
  bus.setMaxListeners(0);
  return bus;
});
export const auditEventsOf = (ctx: Pick<ServiceContext, 'state'>): EventEmitter => stateOf(ctx, AUDIT_EVENTS);

/** Every field of an entry but ID and the times, each with what it holds when an entry does not say. */
const ENTRY_DEFAULTS: readonly (readonly [string, string | number])[] = Object.entries(AuditEntry.fields)
  .filter(([k]) => k !== 'ID' && k !== 'Time' && k !== 'TimeMs')
  .map(([k, field]) => [
    k,
    field.kind === 'object' || field.kind === 'strings' ? '' : (field.default as string | number),
  ]);

/** The stored form of an entry: every field present, with its default where the entry has none. */
function entryDoc(entry: Omit<AuditRecord, 'ID' | 'Time' | 'TimeMs'>, now: number): AuditRecord {
  const doc: AuditRecord = { ID: newId(now), Time: nowStamp(now), TimeMs: now };
  for (const [k, byDefault] of ENTRY_DEFAULTS) doc[k] = entry[k] ?? byDefault;
  return doc;
}

const insertRows = async (db: Db, docs: readonly AuditRecord[]) => {
  const [one] = docs;
  // One entry (a quiet service, or one request at a time): a statement built once (src/store/fixed.ts).
  if (docs.length === 1 && one)
    return fixedQuery(
      db,
      'audit.insert',
      (_, v) =>
        sql`INSERT INTO audit_trail (type, id, data, time) VALUES (${AuditEntry.kind}, ${v.id}, ${v.data}, ${v.time})`,
      { id: String(one.ID), data: JSON.stringify(one), time: Number(one.TimeMs) },
    );
  const many = sql`INSERT INTO audit_trail (type, id, data, time) VALUES ${sql.join(
    docs.map((d) => sql`(${AuditEntry.kind}, ${d.ID}, ${JSON.stringify(d)}, ${d.TimeMs})`),
  )}`.compile(db.kysely);
  // On SQLite at once, as a single entry is (Db.runSync), unless a write transaction is open.
  return db.runSync?.(many.sql, many.parameters) ?? db.kysely.executeQuery(many);
};

/**
 * The stored row of an entry made now, for a write's own statement to insert with the write
 * (src/store/auditrow.ts): the request's line at no extra round trip.
 */
export function auditRowOf(
  entry: Omit<AuditRecord, 'ID' | 'Time' | 'TimeMs'>,
  now = Date.now(),
): WriteAuditRow {
  const doc = entryDoc(entry, now);
  return { type: AuditEntry.kind, id: String(doc.ID), data: JSON.stringify(doc), time: Number(doc.TimeMs) };
}

/** Appends one entry; returns its ID. */
export async function recordAudit(
  db: Db,
  entry: Omit<AuditRecord, 'ID' | 'Time' | 'TimeMs'>,
  now = Date.now(),
  events?: EventEmitter,
) {
  const doc = entryDoc(entry, now);
  await insertRows(db, [doc]);
  events?.emit('recorded');
  return String(doc.ID);
}

/** Entries per INSERT at most (a statement's parameters stay far below both backends' limits). */
const MAX_BATCH = 200;

/**
 * PostgreSQL: batches of entries inserted at once, at most. One at a time made a write wait for
 * the batch in flight, then for its own, each a round trip with a commit: under the soak's 140
 * writes a second on a 2-CPU VM the tail of a PUT held two or three of them (about 10 ms each)
 * after its own commit. Concurrent inserts commit together (PostgreSQL flushes them at once), and
 * readers already take the trail in transaction order (auditAfter).
 */
export const AUDIT_INSERTS_IN_FLIGHT = 4;

/**
 * Group commit for the audit trail: entries recorded while AUDIT_INSERTS_IN_FLIGHT inserts are
 * in flight (PostgreSQL) or in the same turn of the event loop (SQLite) go together in the next
 * one, so under load the trail costs one statement (and one commit) per batch instead of one per
 * request, and at rest exactly what a single insert costs. Each caller's promise settles when its
 * own entry is committed (a client that got its answer finds its entry listed). One per service
 * (src/api/audit.ts makes it), so two services in one process never share a queue.
 */
export class AuditBatch {
  private queue: { doc: AuditRecord; done: (err?: unknown) => void }[] = [];
  /** Inserts running (PostgreSQL), or 1 while a SQLite batch waits for its turn. */
  private inFlight = 0;
  private readonly maxInFlight: number;

  /** `events`: the service's audit bus (auditEventsOf), told after each batch is committed. */
  constructor(
    private readonly db: Db,
    private readonly events?: EventEmitter,
  ) {
    this.maxInFlight = db.runSync ? 1 : AUDIT_INSERTS_IN_FLIGHT;
  }

  record(entry: Omit<AuditRecord, 'ID' | 'Time' | 'TimeMs'>, now = Date.now()): Promise<string> {
    const doc = entryDoc(entry, now);
    return new Promise((resolve, reject) => {
      this.queue.push({ doc, done: (err) => (err ? reject(err) : resolve(String(doc.ID))) });
      if (this.inFlight >= this.maxInFlight) return;
      this.inFlight++;
      // On SQLite a statement runs synchronously (Db.runSync), so an INSERT is never in flight
      // when the next entry comes, and each entry would cost a commit of its own: there the
      // entries of every request answered in this turn of the event loop go together. On
      // PostgreSQL entries gather while the inserts in flight run; waiting a turn measured no better.
      if (this.db.runSync) setImmediate(() => void this.drain());
      else void this.drain();
    });
  }

  private async drain() {
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, MAX_BATCH);
        try {
          await insertRows(
            this.db,
            batch.map((b) => b.doc),
          );
          for (const b of batch) b.done();
          this.events?.emit('recorded');
        } catch (err) {
          for (const b of batch) b.done(err);
        }
      }
    } finally {
      this.inFlight--;
    }
  }
}

export const listAudit = (db: Db, q: ListQuery): Promise<ListPage> =>
  listObjects(db, AuditEntry, q, 'audit_trail');

/**
 * Where an audit stream has read up to. On PostgreSQL entries are inserted by concurrent
 * transactions (each instance's batches, and single entries beside them), whose sequence numbers
 * can commit out of order: a reader that moved past sequence number n while the transaction
 * holding n - 1 was still open would never see that entry. So the stream reads in the order of
 * (transaction id, sequence number), and only entries of transactions older than every one still
 * running (`pg_snapshot_xmin`): nothing can appear behind its position any more. On SQLite, with
 * one writer, the sequence number alone (tx is '0'). The change log's places are the same
 * (src/store/logposition.ts).
 */
export type AuditPosition = LogPosition;

type AuditRow = { tx: string | null; seq: number | string; id: string; data: string };

/** Entries after `from`, oldest first (the event stream). */
export async function auditAfter(
  db: Db,
  from: AuditPosition,
  limit = 1000,
): Promise<{ at: AuditPosition; id: string; data: string }[]> {
  const r =
    db.dialect === 'postgres'
      ? // Qualified: a bare `tx` in ORDER BY would name the text output column and sort as text.
        await sql<AuditRow>`SELECT a.tx::text AS tx, a.seq, a.id, a.data FROM audit_trail a
          WHERE (a.tx, a.seq) > (${from.tx}::xid8, ${from.seq}) AND a.tx < pg_snapshot_xmin(pg_current_snapshot())
          ORDER BY a.tx, a.seq LIMIT ${limit}`.execute(db.kysely)
      : await sql<AuditRow>`SELECT NULL AS tx, seq, id, data FROM audit_trail WHERE seq > ${from.seq}
          ORDER BY seq LIMIT ${limit}`.execute(db.kysely);
  return r.rows.map((x) => ({ at: { tx: x.tx ?? '0', seq: Number(x.seq) }, id: x.id, data: x.data }));
}

/** The position just before the newest `back` entries that a stream may read now. */
export async function auditStart(db: Db, back: number): Promise<AuditPosition> {
  const r =
    db.dialect === 'postgres'
      ? await sql<AuditRow>`SELECT a.tx::text AS tx, a.seq FROM audit_trail a
          WHERE a.tx < pg_snapshot_xmin(pg_current_snapshot())
          ORDER BY a.tx DESC, a.seq DESC LIMIT 1 OFFSET ${back}`.execute(db.kysely)
      : await sql<AuditRow>`SELECT NULL AS tx, seq FROM audit_trail ORDER BY seq DESC LIMIT 1 OFFSET ${back}`.execute(
          db.kysely,
        );
  const row = r.rows[0];
  return row ? { tx: row.tx ?? '0', seq: Number(row.seq) } : LOG_START;
}

/**
 * Retention of the audit trail (server.auditretention): one batch of the oldest entries written
 * before `before`, by the time index. The trail is kept apart from the change log, with a
 * retention of its own: auditors want a year, the event stream's catch-up a few days.
 */
export async function pruneAuditBatch(db: Db, before: number, batch: number): Promise<number> {
  const r =
    await sql`DELETE FROM audit_trail WHERE seq IN (SELECT seq FROM audit_trail WHERE time < ${before} ORDER BY seq LIMIT ${batch})`.execute(
      db.kysely,
    );
  return Number(r.numAffectedRows ?? 0);
}
