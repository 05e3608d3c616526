/**
 * A row of the audit trail that goes in with a write (src/api/auditentry.ts drafts it): the
 * request's entry, committed with the write or not at all, at no extra round trip. On PostgreSQL
 * the write's own final statement inserts it (pgwrite.ts); on SQLite the write's batch does, with
 * the change log's rows, just before its COMMIT (writebatch.ts).
 */
export interface AuditRow {
  type: string;
  id: string;
  data: string;
  time: number;
}

/** The audit row of a write, given the ID of the object written (a creation's new one). */
export type AuditRowFor = (objectId: string) => AuditRow;
