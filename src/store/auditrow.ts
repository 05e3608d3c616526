/**
 * A row of the audit trail that a write's own statement inserts (src/api/auditentry.ts drafts
 * it): the request's entry, committed with the write or not at all, at no extra round trip.
 */
export interface AuditRow {
  type: string;
  id: string;
  data: string;
  time: number;
}

/** The audit row of a write, given the ID of the object written (a creation's new one). */
export type AuditRowFor = (objectId: string) => AuditRow;
