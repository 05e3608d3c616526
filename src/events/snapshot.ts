import type { Db } from '../store/db.js';

export interface Snapshot {
  /** The change-log sequence number the rows are consistent with: tail from here. */
  seq: number;
  rows: { id: string; data: string }[];
}

/**
 * The objects of a kind (or the one with `id`) together with the newest change-log sequence
 * number, read in one transaction so that both describe the same moment: a read transaction on
 * SQLite (WAL snapshot), REPEATABLE READ on PostgreSQL. Writers commit in sequence order (the
 * store serializes them), so every change up to `seq` is in the rows and none after it is.
 */
export async function takeSnapshot(db: Db, kind: string, id?: string): Promise<Snapshot> {
  let tx = db.kysely.transaction();
  if (db.dialect === 'postgres') tx = tx.setIsolationLevel('repeatable read').setAccessMode('read only');
  return tx.execute(async (t) => {
    const last = await t
      .selectFrom('changes')
      .select((eb) => eb.fn.max('seq').as('seq'))
      .executeTakeFirst();
    let q = t.selectFrom('objects').select(['id', 'data']).where('type', '=', kind);
    if (id !== undefined) q = q.where('id', '=', id);
    const rows = await q.orderBy('id').execute();
    return { seq: Number(last?.seq ?? 0), rows };
  });
}
