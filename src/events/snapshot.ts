import { sql } from 'kysely';
import type { Db } from '../store/db.js';
import { type LogSnapshot, pgLogSnapshot } from '../store/logposition.js';

export interface Snapshot {
  /** The changes the rows already reflect: a change the tailer delivers later is dropped when `saw` has it. */
  saw: LogSnapshot;
  rows: { id: string; data: string }[];
}

/** Own-only access: only the objects whose owner field is this user. */
export interface OwnerFilter {
  field: string;
  value: string;
}

/**
 * The owner field in SQL. The filter is applied by the database, not after reading: an own-only
 * subscriber (scope user) must not make the service read every user's rows into memory.
 */
function ownerExpr(dialect: Db['dialect'], field: string) {
  if (field === 'ID') return sql<string>`id`;
  // Field names come from the type definitions, never from a client; checked all the same.
  if (!/^[A-Za-z][A-Za-z0-9]*$/.test(field)) throw new Error(`not a field name: ${field}`);
  return dialect === 'sqlite'
    ? sql<string>`json_extract(data, ${sql.lit(`$.${field}`)})`
    : sql<string>`(doc ->> ${sql.lit(field)})`;
}

/**
 * The objects of a kind (or the one with `id`) together with what the reading transaction saw of
 * the change log, read in one transaction so that both describe the same moment: a read
 * transaction on SQLite (WAL snapshot; one writer, so every change up to the newest sequence
 * number is in the rows and none after it is), REPEATABLE READ on PostgreSQL (the transaction's
 * snapshot: the rows reflect exactly the changes of the transactions it counts as committed,
 * src/store/logposition.ts).
 */
export async function takeSnapshot(
  db: Db,
  kind: string,
  id?: string,
  owner?: OwnerFilter,
): Promise<Snapshot> {
  let tx = db.kysely.transaction();
  if (db.dialect === 'postgres') tx = tx.setIsolationLevel('repeatable read').setAccessMode('read only');
  return tx.execute(async (t) => {
    // The first statement fixes a REPEATABLE READ transaction's snapshot for the rest of it.
    const saw: LogSnapshot =
      db.dialect === 'postgres'
        ? pgLogSnapshot(
            (await sql<{ s: string }>`SELECT pg_current_snapshot()::text AS s`.execute(t)).rows[0]?.s ?? '',
          )
        : {
            upToSeq: Number(
              (
                await t
                  .selectFrom('changes')
                  .select((eb) => eb.fn.max('seq').as('seq'))
                  .executeTakeFirst()
              )?.seq ?? 0,
            ),
          };
    let q = t.selectFrom('objects').select(['id', 'data']).where('type', '=', kind);
    if (id !== undefined) q = q.where('id', '=', id);
    if (owner) q = q.where(ownerExpr(db.dialect, owner.field), '=', owner.value);
    const rows = await q.orderBy('id').execute();
    return { saw, rows };
  });
}
