// Why ~840 lines: ObjectStore's reads and writes share private machinery (the compiled-SQL cache
// and its synchronous SQLite reader, the write transaction with its row locks and 'commit' event,
// the change-log append that gives every write its ETag); splitting reads from writes would make
// it public across files. What a stored object is (stored.ts), the list SQL (listread.ts), what
// a write takes from its type's declaration (typerules.ts) and how PostgreSQL writers run side by
// side (pgwrite.ts) stand apart.
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { type Compilable, CompiledQuery, type Kysely, sql, type Transaction } from 'kysely';
import { ApiError } from '../core/errors.js';
import { type Doc, normalize } from '../schema/fields.js';
import type { Actor, ObjectType } from '../schema/type.js';
import type { AuditRow, AuditRowFor } from './auditrow.js';
import type { Database, Db } from './db.js';
import type { ListQuery } from './listquery.js';
import { type ListPage, listObjects } from './listread.js';
import { NamedLocks } from './locks.js';
import { isAfter, LOG_START, type LogPosition } from './logposition.js';
import { alteredObject, CommitNotifier } from './notifier.js';
import { whileAnotherWrites } from './otherwriters.js';
import {
  keyTaken,
  LoneWrites,
  lostRace,
  type PendingChange,
  pgWrite,
  readForReplace,
  WRITE_ATTEMPTS,
} from './pgwrite.js';
import { ReadBatches } from './readbatch.js';
import { RowCache } from './rowcache.js';
import {
  etagMatches,
  newEtag,
  newId,
  parseSecret,
  type StoredObject,
  type StoredRow,
  secretText,
  toStored,
  toStoredWithSecret,
} from './stored.js';
import { allWritable, checkRefs, keysOf, prepare, writeKeys } from './typerules.js';
import { type AppendedRow, AppendOnlyTable, WriteBatches } from './writebatch.js';

export type { ListPage } from './listread.js';
export { CHANGES_CHANNEL } from './pgwrite.js';
export { etagMatches, newId, type StoredObject } from './stored.js';

export interface Change extends LogPosition {
  type: string;
  id: string;
  /** null for a delete. */
  data: string | null;
  etag: string;
  time: number;
}

type Tx = Transaction<Database>;

export { alteredObject } from './notifier.js';

/** SQLite's change log and audit trail: appended at a write batch's end (writebatch.ts). */
const SQLITE_CHANGES = new AppendOnlyTable('changes', ['type', 'id', 'data', 'etag', 'time']);
const SQLITE_AUDIT_TRAIL = new AppendOnlyTable('audit_trail', ['type', 'id', 'data', 'time']);

/**
 * A SQLite write's change-log rows, in order (one writer at a time, so sequence numbers commit in
 * that order), and its request's audit row, carried by the first change.
 */
function sqliteLogRows(changes: readonly PendingChange[]): AppendedRow[] {
  const rows: AppendedRow[] = changes.map((c) => ({
    into: SQLITE_CHANGES,
    values: [c.type, c.id, c.data, c.etag, c.time],
  }));
  const audit = changes[0]?.audit;
  if (audit) rows.push({ into: SQLITE_AUDIT_TRAIL, values: [audit.type, audit.id, audit.data, audit.time] });
  return rows;
}

/**
 * The object repository: every type is stored the same way, every write appends to the change
 * log in the same transaction, and writes are conditional on the ETag inside that transaction.
 */
export class ObjectStore {
  /**
   * Emits 'commit' after every committed write, so in-process readers of the change log wake at
   * once, with the set of kinds whose existing objects it updated or deleted (creations are not in
   * it); and 'remote' when another instance is known to have committed (src/events/tailer.ts),
   * with the kinds it updated or deleted, the kinds it created and the objects it updated or
   * deleted when its notice says (else none: drop everything).
   */
  readonly commits = new EventEmitter();

  /** The payload of this store's change notifications (PostgreSQL): its tailer ignores its own. */
  readonly notifyTag = randomUUID();

  /** PostgreSQL: tells the other instances of this store's commits (pgwrite.ts). */
  readonly notifier: CommitNotifier | undefined;

  /** PostgreSQL: creations with nothing to check go to the database together (pgwrite.ts). */
  private readonly loneWrites: LoneWrites | undefined;

  /** Named locks for decisions that must not be made twice at once (locks.ts). */
  readonly locks: NamedLocks;

  /** SQLite: rows read by `get`, kept while nothing is committed (rowcache.ts). */
  private readonly rowCache: RowCache<StoredRow> | undefined;

  /** Reads by ID of one turn of the event loop, answered together (readbatch.ts). */
  private readonly reads: ReadBatches<StoredRow> | undefined;

  constructor(readonly db: Db) {
    this.commits.setMaxListeners(0);
    this.rowCache = db.readVersion && db.readSync ? new RowCache(db.readVersion) : undefined;
    this.locks = new NamedLocks(db);
    this.reads = this.readBatches();
    this.batches = db.writeSync ? new WriteBatches({ ...db, writeSync: db.writeSync }) : undefined;
    this.notifier = db.pool ? new CommitNotifier(db.pool, this.notifyTag) : undefined;
    this.loneWrites = db.pool ? new LoneWrites(db) : undefined;
  }

  /**
   * Reads by ID of one turn of the event loop, answered together (readbatch.ts): on PostgreSQL in
   * one statement; on SQLite with one question whether anything was committed, and the rows not
   * kept read in one statement. An in-memory SQLite database (tests) reads each at once.
   */
  private readBatches(): ReadBatches<StoredRow> | undefined {
    if (this.db.pool)
      return new ReadBatches(
        (kind, id) => this.readRow(kind, id),
        (kind, ids) => this.readRows(kind, ids),
      );
    const { rowCache } = this;
    if (!rowCache || !this.db.readSync) return undefined;
    return new ReadBatches(
      (kind, id) => this.readRowKept(rowCache, kind, id),
      async (kind, ids) => this.readRowsKept(rowCache, kind, ids),
    );
  }

  /**
   * Settles once this store's last writes have committed and, on PostgreSQL, been announced to
   * the other instances: what a service waits for before it closes the database.
   */
  async settled(): Promise<void> {
    await this.batches?.idle();
    await this.notifier?.settled();
  }

  private get k() {
    return this.db.kysely;
  }

  /**
   * Runs `drop` after every commit that updated or deleted an object of one of `kinds`: at once
   * for this store's, when its notice arrives for another instance's, and for every commit whose
   * kinds are not known. The one rule of the caches built from objects (API keys, the Tenant):
   * a new object cannot change what they hold, a changed or deleted one can. `drop` is given
   * which objects of `kinds` they were (alteredObject keys), so a cache can drop only what depends
   * on them; when a commit's objects are not known (another instance's notice that does not name
   * them, a resync) it is given nothing: drop all.
   */
  onAltered(kinds: readonly string[], drop: (objects?: ReadonlySet<string>) => void): void {
    const altered = (updated?: ReadonlySet<string>, objects?: ReadonlySet<string>) => {
      if (updated && !kinds.some((k) => updated.has(k))) return;
      if (!updated || !objects) return drop();
      const ofKinds = new Set<string>();
      for (const o of objects) if (kinds.includes(o.slice(0, o.indexOf(' ')))) ofKinds.add(o);
      drop(ofKinds);
    };
    this.commits.on('commit', altered);
    this.commits.on(
      'remote',
      (updated?: ReadonlySet<string>, _created?: ReadonlySet<string>, objects?: ReadonlySet<string>) =>
        altered(updated, objects),
    );
  }

  async get(type: ObjectType, id: string): Promise<StoredObject | undefined> {
    const row = this.reads ? await this.reads.get(type.kind, id) : await this.readRow(type.kind, id);
    return row && toStored(row);
  }

  /** SQLite: one object's row, from the row cache when nothing was committed since it was kept. */
  private async readRowKept(cache: RowCache<StoredRow>, kind: string, id: string) {
    const cached = cache.lookup(kind, id);
    if (cached.row) return cached.row;
    const row = await this.readRow(kind, id);
    if (row) cache.keep(kind, id, row, cached.at);
    return row;
  }

  /**
   * SQLite: the rows of those of `ids` that exist, asking once whether anything was committed
   * (rowcache.ts) and reading the rows not kept in one statement.
   */
  private readRowsKept(cache: RowCache<StoredRow>, kind: string, ids: string[]) {
    const { rows: kept, at } = cache.lookupMany(kind, ids);
    const missing = ids.filter((id) => !kept.has(id));
    const read = missing.length
      ? (this.db.readSync as NonNullable<Db['readSync']>)<StoredRow>(
          'SELECT id, data, etag, create_time, modify_time FROM objects WHERE type = ? AND id IN (SELECT value FROM json_each(?))',
          [kind, JSON.stringify(missing)],
        )
      : [];
    for (const row of read) cache.keep(kind, row.id, row, at);
    return [...kept.values(), ...read];
  }

  /** One object's stored row. */
  private async readRow(kind: string, id: string): Promise<StoredRow | undefined> {
    const [row] = await this.fixed<StoredRow>(
      'get',
      () =>
        this.k
          .selectFrom('objects')
          .select(['id', 'data', 'etag', 'create_time', 'modify_time'])
          .where('type', '=', '')
          .where('id', '=', ''),
      [kind, id],
    );
    return row;
  }

  /** PostgreSQL: the stored rows of those of `ids` that exist, in one statement (readbatch.ts). */
  private readRows(kind: string, ids: string[]): Promise<StoredRow[]> {
    return this.run<StoredRow>(
      'SELECT id, data, etag, create_time, modify_time FROM objects WHERE type = $1 AND id = ANY($2::text[])',
      [kind, ids],
    );
  }

  /**
   * Which of `ids` exist as objects of `type`, read from the database in one statement per 500
   * (background sweeps ask for a page of IDs at a time; the row cache is not consulted).
   */
  async existing(type: ObjectType, ids: readonly string[]): Promise<Set<string>> {
    const found = new Set<string>();
    for (let at = 0; at < ids.length; at += 500) {
      const rows = await this.k
        .selectFrom('objects')
        .select('id')
        .where('type', '=', type.kind)
        .where('id', 'in', ids.slice(at, at + 500))
        .execute();
      for (const r of rows) found.add(r.id);
    }
    return found;
  }

  /** Hidden state (hashes) of an object; {} when none. */
  async getSecret(type: ObjectType, id: string): Promise<Doc> {
    const [row] = await this.fixed<{ secret: string | null }>(
      'getSecret',
      () => this.k.selectFrom('objects').select('secret').where('type', '=', '').where('id', '=', ''),
      [type.kind, id],
    );
    return parseSecret(row?.secret ?? null);
  }

  /** Finds an object by one of its lookup keys (a unique field, or a hidden key such as an API key hash). */
  async findByKey(
    type: ObjectType,
    name: string,
    value: string,
  ): Promise<(StoredObject & { secret: Doc }) | undefined> {
    const [row] = await this.fixed<StoredRow & { secret: string | null }>(
      'findByKey',
      () =>
        this.k
          .selectFrom('object_keys as k')
          .innerJoin('objects as o', (j) => j.onRef('o.type', '=', 'k.type').onRef('o.id', '=', 'k.id'))
          .select(['o.id', 'o.data', 'o.etag', 'o.create_time', 'o.modify_time', 'o.secret'])
          .where('k.type', '=', '')
          .where('k.name', '=', '')
          .where('k.value', '=', ''),
      [type.kind, name, value],
    );
    return row && toStoredWithSecret(row);
  }

  /**
   * Like findByKey, and also returns the object that a reference field of the found one names
   * (e.g. an API key and its user) in the same query: one round trip on the hottest path.
   * `ref` is undefined when the field is empty or names nothing.
   */
  async findByKeyWithRef(
    type: ObjectType,
    name: string,
    value: string,
    refField: string,
  ): Promise<{ obj: StoredObject & { secret: Doc }; ref: StoredObject | undefined } | undefined> {
    const field = type.fields[refField];
    if (field?.kind !== 'string' || !field.ref)
      throw new Error(`${type.kind}.${refField} is not a reference field`);
    // The field name is one of our declared identifiers, never client input.
    const refId =
      this.db.dialect === 'sqlite'
        ? sql.raw(`json_extract(o.data, '$.${refField}')`)
        : sql.raw(`(o.doc->>'${refField}')`);
    let text = this.fixedSql.get(`findByKeyWithRef:${type.kind}.${refField}`);
    if (text === undefined) {
      text = sql`SELECT o.id, o.data, o.etag, o.create_time, o.modify_time, o.secret,
          r.id AS r_id, r.data AS r_data, r.etag AS r_etag, r.create_time AS r_create_time, r.modify_time AS r_modify_time
        FROM object_keys k
        JOIN objects o ON o.type = k.type AND o.id = k.id
        LEFT JOIN objects r ON r.type = ${field.ref} AND r.id = ${refId}
        WHERE k.type = ${type.kind} AND k.name = ${''} AND k.value = ${''}`.compile(this.k).sql;
      this.fixedSql.set(`findByKeyWithRef:${type.kind}.${refField}`, text);
    }
    type Row = StoredRow & {
      secret: string | null;
      r_id: string | null;
      r_data: string;
      r_etag: string;
      r_create_time: number;
      r_modify_time: number;
    };
    const [row] = await this.run<Row>(text, [field.ref, type.kind, name, value]);
    if (!row) return undefined;
    const ref =
      row.r_id === null
        ? undefined
        : toStored({
            id: row.r_id,
            data: row.r_data,
            etag: row.r_etag,
            create_time: row.r_create_time,
            modify_time: row.r_modify_time,
          });
    return { obj: toStoredWithSecret(row), ref };
  }

  /**
   * Creates an object from a client body. `id` is given for named types and the singleton,
   * generated otherwise. Returns the stored object and, for APIKey, the extra response body.
   */
  async create(
    type: ObjectType,
    input: unknown,
    id?: string,
    actor?: Actor,
    auditRow?: AuditRowFor,
  ): Promise<{ obj: StoredObject; response?: Doc }> {
    const objectId = id ?? newId();
    return this.write(
      async (tx) => {
        // A generated id is 72 random bits: a clash is left to the primary key. A chosen name is checked.
        if (id !== undefined && (await this.row(tx, type, id))) {
          throw new ApiError('Conflict', `${type.kind} ${objectId} already exists`);
        }
        const prepared = await prepare(type, input, undefined, {}, actor);
        prepared.doc.ID = objectId;
        await checkRefs(tx, type, prepared.doc, undefined, this.concurrent);
        const obj = await this.insert(tx, type, objectId, prepared.doc, prepared.secret);
        return { obj, response: prepared.response };
      },
      auditRow && (() => auditRow(objectId)),
    );
  }

  /**
   * Replaces an object with a client body, if `ifMatch` holds its current ETag.
   * 404 before 412 before 304 (unchanged: nothing written, no change logged).
   */
  async update(
    type: ObjectType,
    id: string,
    input: unknown,
    ifMatch: string,
    actor?: Actor,
    auditRow?: AuditRowFor,
  ): Promise<{ obj: StoredObject; changed: boolean }> {
    return this.write(
      async (tx) => {
        const current = await this.current(tx, type, id, true);
        if (!etagMatches(ifMatch, current.etag, false)) {
          throw new ApiError(
            'PreconditionFailed',
            `If-Match does not hold the current ETag of ${type.kind} ${id}; fetch it again`,
            {
              field: 'If-Match',
            },
          );
        }
        const prepared = await prepare(type, input, current.doc, current.secret, actor);
        prepared.doc.ID = id;
        await checkRefs(tx, type, prepared.doc, current.doc, this.concurrent);
        const data = JSON.stringify(prepared.doc);
        if (data === current.data && JSON.stringify(prepared.secret) === JSON.stringify(current.secret)) {
          return { obj: current, changed: false };
        }
        return { obj: await this.replace(tx, type, current, prepared.doc, prepared.secret), changed: true };
      },
      auditRow && (() => auditRow(id)),
    );
  }

  async delete(type: ObjectType, id: string, ifMatch: string, auditRow?: AuditRowFor): Promise<void> {
    await this.write(
      async (tx) => {
        const current = await this.current(tx, type, id);
        if (!etagMatches(ifMatch, current.etag, false)) {
          throw new ApiError(
            'PreconditionFailed',
            `If-Match does not hold the current ETag of ${type.kind} ${id}`,
            { field: 'If-Match' },
          );
        }
        await this.remove(tx, type, id);
      },
      auditRow && (() => auditRow(id)),
    );
  }

  /**
   * Server-side read-modify-write, for objects the service itself maintains (read-only types,
   * flags such as HavePIN, hidden hashes). `mutate` gets the stored doc and secret (undefined when
   * absent) and returns the new ones, or null to delete. No ETag check: the transaction is the guard.
   */
  async systemPut(
    type: ObjectType,
    id: string,
    mutate: (
      doc: Doc | undefined,
      secret: Doc,
    ) => { doc: Doc; secret?: Doc } | null | Promise<{ doc: Doc; secret?: Doc } | null>,
  ): Promise<StoredObject | undefined> {
    return this.write(async (tx) => {
      // Locking, unlike update(): `mutate` may take long (it may hash, or wait for something),
      // and the writers of the same object wait for it rather than make it run again.
      const current = await this.row(tx, type, id);
      const next = await mutate(current?.doc, current?.secret ?? {});
      if (next === null) {
        if (current) await this.remove(tx, type, id);
        return undefined;
      }
      // Normalize as if every field were writable, so stored docs always have the declared shape.
      const doc = normalize(allWritable(type), next.doc, undefined);
      doc.ID = id;
      const secret = next.secret ?? current?.secret ?? {};
      if (!current) return this.insert(tx, type, id, doc, secret);
      if (JSON.stringify(doc) === current.data && JSON.stringify(secret) === JSON.stringify(current.secret))
        return current;
      return this.replace(tx, type, current, doc, secret);
    });
  }

  /**
   * Inserts new objects the service itself records (such as ScriptLogs) in one transaction, each
   * with a generated ID: one commit for a batch instead of one per object. Returns them in order.
   */
  async systemInsertMany(type: ObjectType, docs: readonly Doc[]): Promise<StoredObject[]> {
    if (docs.length === 0) return [];
    const fields = allWritable(type);
    return this.write(async (tx) => {
      const out: StoredObject[] = [];
      for (const d of docs) {
        const id = newId();
        const doc = normalize(fields, d, undefined);
        doc.ID = id;
        out.push(await this.insert(tx, type, id, doc, {}));
      }
      return out;
    });
  }

  /** The newest change-log sequence number (0 when empty). */
  async lastSeq(): Promise<number> {
    const row = await this.k
      .selectFrom('changes')
      .select((eb) => eb.fn.max('seq').as('seq'))
      .executeTakeFirst();
    return Number(row?.seq ?? 0);
  }

  /**
   * The newest place in the log that a reader may take as read (src/store/logposition.ts): on
   * PostgreSQL the last row of the transactions older than every one still running, or the
   * pruner's mark when that is later (the pruner keeps the row with the newest sequence number,
   * which need not be the last in the log's order): a reader starting there has lost nothing.
   */
  async lastPosition(): Promise<LogPosition> {
    if (!this.concurrent) return { tx: '0', seq: await this.lastSeq() };
    // Ordered inside the subquery, on the xid8 column; made text only outside it (an ORDER BY
    // beside a `tx::text AS tx` output column would sort as text).
    const r = await sql<{ tx: string; seq: string; ptx: string; pseq: string }>`SELECT c.tx::text AS tx,
        c.seq, p.tx::text AS ptx, p.seq AS pseq
      FROM changes_pruned p LEFT JOIN LATERAL (SELECT tx, seq FROM changes
        WHERE tx < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY tx DESC, seq DESC LIMIT 1) c ON true
      WHERE p.id = 1`.execute(this.k);
    const row = r.rows[0];
    if (!row) return LOG_START;
    const pruned = { tx: row.ptx, seq: Number(row.pseq) };
    if (row.tx === null || row.tx === undefined) return pruned;
    const last = { tx: row.tx, seq: Number(row.seq) };
    return isAfter(pruned, last) ? pruned : last;
  }

  /**
   * Up to `limit` changes after `from`, in log order, that can be read now. `waiting`: committed
   * changes follow them that cannot be read yet, because a transaction older than theirs is still
   * running (it may yet add changes before them); read again shortly. `pruned`: the newest place
   * the pruner has deleted through (src/store/changelog.ts). `committedBelow` (PostgreSQL): every
   * transaction that committed before this read has an id below it (the read's snapshot xmax).
   */
  async changesAfter(
    from: LogPosition,
    limit = 1000,
  ): Promise<{ changes: Change[]; waiting: boolean; pruned: LogPosition; committedBelow?: string }> {
    type Row = Omit<Change, 'seq' | 'time'> & { seq: string | number; time: string | number; ready: unknown };
    type Read = Row & { pruned: string; xmax?: string };
    const pruned = sql`(SELECT ${this.concurrent ? sql`p.tx::text || ':' || p.seq` : sql`'0:' || p.seq`}
      FROM changes_pruned p WHERE p.id = 1) AS pruned`;
    // Qualified: a bare `tx` in ORDER BY would name the text output column and sort as text.
    const r = this.concurrent
      ? await sql<Read>`SELECT c.seq, c.tx::text AS tx, c.type, c.id, c.data, c.etag, c.time,
          c.tx < pg_snapshot_xmin(pg_current_snapshot()) AS ready, ${pruned},
          pg_snapshot_xmax(pg_current_snapshot())::text AS xmax
          FROM changes c WHERE (c.tx, c.seq) > (${from.tx}::xid8, ${from.seq})
          ORDER BY c.tx, c.seq LIMIT ${limit}`.execute(this.k)
      : await sql<Read>`SELECT c.seq, '0' AS tx, c.type, c.id, c.data, c.etag, c.time, 1 AS ready, ${pruned}
          FROM changes c WHERE c.seq > ${from.seq} ORDER BY c.seq LIMIT ${limit}`.execute(this.k);
    const changes: Change[] = [];
    let waiting = false;
    for (const row of r.rows) {
      if (!row.ready) {
        waiting = true;
        break;
      }
      const { ready: _, pruned: __, xmax: ___, ...c } = row;
      changes.push({ ...c, seq: Number(c.seq), time: Number(c.time) });
    }
    const [tx, seq] = (r.rows[0]?.pruned ?? '0:0').split(':');
    const xmax = r.rows[0]?.xmax;
    return {
      changes,
      waiting,
      pruned: { tx: tx ?? '0', seq: Number(seq ?? 0) },
      ...(xmax ? { committedBelow: xmax } : {}),
    };
  }

  /** Streams a list as JSON lines of ListItem {"ID","Item"}; see listquery.ts for the language and its SQL. */
  async list(type: ObjectType, q: ListQuery): Promise<ListPage> {
    return listObjects(this.db, type, q);
  }

  // ---- internals ------------------------------------------------------------------------------

  private readonly fixedSql = new Map<string, string>();

  /**
   * Runs a query of fixed shape, building and compiling its SQL only once: on a primary-key
   * lookup, Kysely's builder and compiler cost more than the database. `params` are given in the
   * order the builder's placeholders appear.
   */
  private async fixed<R>(
    name: string,
    build: () => Compilable<unknown>,
    params: unknown[],
    executor: Kysely<Database> | Tx = this.k,
  ): Promise<R[]> {
    return this.run<R>(this.fixedText(name, build, params.length), params, executor);
  }

  /** The SQL of a query of fixed shape (fixed), compiled on first use. */
  private fixedText(name: string, build: () => Compilable<unknown>, params?: number): string {
    let text: string | undefined = this.fixedSql.get(name);
    if (text === undefined) {
      const compiled = build().compile();
      if (params !== undefined && compiled.parameters.length !== params)
        throw new Error(`query ${name} takes ${compiled.parameters.length} parameters`);
      text = compiled.sql;
      this.fixedSql.set(name, text);
    }
    return text;
  }

  /** Runs compiled SQL: reads outside a transaction take SQLite's synchronous reader when there is one. */
  private async run<R>(
    text: string,
    params: unknown[],
    executor: Kysely<Database> | Tx = this.k,
  ): Promise<R[]> {
    if (executor === this.k && this.db.readSync && /^\s*select\b/i.test(text))
      return this.db.readSync<R>(text, params);
    if (this.db.writeSync && this.batches?.holds(executor)) return this.db.writeSync<R>(text, params).rows;
    return (await executor.executeQuery<R>(CompiledQuery.raw(text, params))).rows;
  }

  /**
   * The objects a transaction updated or deleted (not created), for the 'commit' event: their
   * kinds, and each object by its alteredObject key.
   */
  private readonly altered = new WeakMap<Tx, { kinds: Set<string>; objects: Set<string> }>();

  /** Change-log rows of a transaction, appended just before it commits. */
  private readonly pending = new WeakMap<Tx, PendingChange[]>();

  /** SQLite: the writes of one turn of the event loop share a transaction (writebatch.ts). */
  private readonly batches: WriteBatches | undefined;

  /** PostgreSQL: writers run side by side (pgwrite.ts); SQLite has one writer at a time. */
  private get concurrent() {
    return this.db.dialect === 'postgres';
  }

  /**
   * Runs `fn` in a write transaction. `fn` may run more than once (on PostgreSQL a lost race on a
   * row lock or a unique key runs it again, see pgwrite.ts; on SQLite another process's write,
   * see writebatch.ts): it must do nothing outside `tx` that a second run would repeat wrongly.
   */
  private async write<T>(fn: (tx: Tx) => Promise<T>, audit?: () => AuditRow): Promise<T> {
    if (!this.concurrent) {
      // Another process (the CLI) wrote while this write ran (writebatch.ts, metAnotherWriter): it
      // runs again on what is committed now, polling on timers while that process holds the
      // write lock or keeps committing (otherwriters.ts).
      return whileAnotherWrites(
        () => this.writeOnce(fn, false, audit),
        (err) => this.batches?.metAnotherWriter(err) ?? false,
      );
    }
    for (let attempt = 1; ; attempt++) {
      try {
        // Only a first attempt reads unlocked: a rerun locks, so a write always gets through.
        return await this.writeOnce(fn, attempt === 1, audit);
      } catch (err) {
        if (!lostRace(err)) throw err;
        if (attempt >= WRITE_ATTEMPTS) throw (err as { code?: string }).code === '23505' ? keyTaken() : err;
      }
    }
  }

  /**
   * One attempt of a write. `audit`: the request's audit row, carried by the write's first change
   * into its own statement (nothing is recorded when nothing is written).
   */
  private async writeOnce<T>(
    fn: (tx: Tx) => Promise<T>,
    unlockedReads = false,
    audit?: () => AuditRow,
  ): Promise<T> {
    const altered = { kinds: new Set<string>(), objects: new Set<string>() };
    const changes: PendingChange[] = [];
    const run = async (tx: Tx) => {
      this.altered.set(tx, altered);
      this.pending.set(tx, changes);
      const result = await fn(tx);
      const [first] = changes;
      if (audit && first) first.audit = audit();
      return result;
    };
    let result: T;
    let told: Promise<void> | undefined;
    if (this.concurrent) {
      result = await pgWrite(
        this.db,
        async (tx) => ({ result: await run(tx), changes }),
        this.loneWrites,
        unlockedReads,
      );
      if (changes.length > 0)
        told = this.notifier?.committed(
          changes,
          changes.some((c) => c.prompt === true),
        );
    } else {
      if (!this.batches) throw new Error('a SQLite store without its writer');
      // The change log's rows and the audit row go in at the batch's end (writebatch.ts).
      result = await this.batches.run(run, () => sqliteLogRows(changes));
    }
    this.commits.emit('commit', altered.kinds, altered.objects);
    // Answered once the other instances have been told, where they cache what changed (notifier.ts).
    await told;
    return result;
  }

  /**
   * The stored row with its hidden state, read inside a write transaction. `forReplace`: the
   * write replaces this row only with what it computes from it, so on PostgreSQL it may read
   * without a lock, its final statement checking that the row is unchanged (readForReplace).
   */
  private async row(
    tx: Tx,
    type: ObjectType,
    id: string,
    forReplace = false,
  ): Promise<(StoredObject & { secret: Doc }) | undefined> {
    type Row = StoredRow & { secret: string | null };
    const build = (lock: boolean) => () => {
      const q = this.k
        .selectFrom('objects')
        .select(['id', 'data', 'etag', 'create_time', 'modify_time', 'secret'])
        .where('type', '=', '')
        .where('id', '=', '');
      return lock ? q.forUpdate() : q;
    };
    if (this.concurrent && forReplace) {
      const unlocked = await readForReplace<Row>(
        tx,
        this.fixedText('row', build(false)),
        [type.kind, id],
        type.kind,
        id,
      );
      if (unlocked) return unlocked.row && toStoredWithSecret(unlocked.row);
    }
    // On PostgreSQL the row is locked until commit: a concurrent writer of the same object waits
    // here, then reads what this one committed (its ETag check and read-modify-write stay exact).
    const [row] = await this.fixed<Row>(
      this.concurrent ? 'rowForUpdate' : 'row',
      build(this.concurrent),
      [type.kind, id],
      tx,
    );
    return row && toStoredWithSecret(row);
  }

  private async current(
    tx: Tx,
    type: ObjectType,
    id: string,
    forReplace = false,
  ): Promise<StoredObject & { secret: Doc }> {
    const found = await this.row(tx, type, id, forReplace);
    if (!found) throw new ApiError('NotFound', `${type.kind} ${id} does not exist`);
    return found;
  }

  /**
   * Records a change for the change log, appended when the transaction ends (write()); returns
   * the object's new ETag (random, so it reveals nothing).
   */
  private logChange(
    tx: Tx,
    type: ObjectType,
    id: string,
    data: string | null,
    now: number,
    object?: Pick<PendingChange, 'object' | 'createTime' | 'secret'>,
  ): string {
    const etag = newEtag();
    const pending = this.pending.get(tx);
    if (!pending) throw new Error('a change outside a write transaction');
    const cached = type.cachedElsewhere;
    const prompt = cached === 'all' || (cached === 'changes' && object?.object !== 'insert');
    pending.push({ type: type.kind, id, data, etag, time: now, ...object, ...(prompt ? { prompt } : {}) });
    return etag;
  }

  private async insert(tx: Tx, type: ObjectType, id: string, doc: Doc, secret: Doc): Promise<StoredObject> {
    const now = Date.now();
    const data = JSON.stringify(doc);
    await writeKeys(tx, type, id, keysOf(type, doc, secret), new Map());
    if (this.concurrent) {
      // Written with the change-log append, just before COMMIT (pgwrite.ts).
      const etag = this.logChange(tx, type, id, data, now, {
        object: 'insert',
        createTime: now,
        secret: secretText(secret),
      });
      return { id, doc, data, etag, createTime: now, modifyTime: now };
    }
    const etag = this.logChange(tx, type, id, data, now);
    await this.fixed(
      'insert',
      () =>
        this.k
          .insertInto('objects')
          .values({ type: '', id: '', data: '', etag: '', create_time: 0, modify_time: 0, secret: '' }),
      [type.kind, id, data, etag, now, now, secretText(secret)],
      tx,
    );
    return { id, doc, data, etag, createTime: now, modifyTime: now };
  }

  private async replace(
    tx: Tx,
    type: ObjectType,
    current: StoredObject & { secret: Doc },
    doc: Doc,
    secret: Doc,
  ): Promise<StoredObject> {
    const now = Math.max(Date.now(), current.modifyTime);
    const data = JSON.stringify(doc);
    await writeKeys(
      tx,
      type,
      current.id,
      keysOf(type, doc, secret),
      keysOf(type, current.doc, current.secret),
    );
    this.noteAltered(tx, type, current.id);
    if (this.concurrent) {
      // Written with the change-log append, just before COMMIT; the row is locked since row().
      const etag = this.logChange(tx, type, current.id, data, now, {
        object: 'replace',
        secret: secretText(secret),
      });
      return { ...current, doc, data, etag, modifyTime: now };
    }
    const etag = this.logChange(tx, type, current.id, data, now);
    await this.fixed(
      'replace',
      () =>
        this.k
          .updateTable('objects')
          .set({ data: '', etag: '', modify_time: 0, secret: '' })
          .where('type', '=', '')
          .where('id', '=', ''),
      [data, etag, now, secretText(secret), type.kind, current.id],
      tx,
    );
    return { ...current, doc, data, etag, modifyTime: now };
  }

  private noteAltered(tx: Tx, type: ObjectType, id: string) {
    const altered = this.altered.get(tx);
    altered?.kinds.add(type.kind);
    altered?.objects.add(alteredObject(type.kind, id));
  }

  private async remove(tx: Tx, type: ObjectType, id: string) {
    await tx.deleteFrom('object_keys').where('type', '=', type.kind).where('id', '=', id).execute();
    await tx.deleteFrom('objects').where('type', '=', type.kind).where('id', '=', id).execute();
    this.noteAltered(tx, type, id);
    this.logChange(tx, type, id, null, Date.now());
  }
}
