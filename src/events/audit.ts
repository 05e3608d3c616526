import { AuditEntry, auditAfter, auditEventsOf, auditStart } from '../audit/trail.js';
import { decide } from '../policy/decide.js';
import { StreamError } from './protocol.js';
import type { SpecialKind } from './special.js';

/** The snapshot of a new subscription: the newest entries, not the whole trail. */
export const AUDIT_SNAPSHOT = 1000;
/** Entries written by other instances are picked up at least this often. */
export const AUDIT_POLL_MS = 1000;

/**
 * Kind AuditEntry (docs/directory.md): for admin and audit credentials, the newest
 * AUDIT_SNAPSHOT entries, the catch-up marker, then every new entry (at once for this instance's,
 * within AUDIT_POLL_MS for other instances'; on PostgreSQL once every older transaction has
 * ended, see auditAfter). ID is not supported (entries never change).
 */
export const auditKind: SpecialKind = {
  async subscribe(ctx) {
    if (!(await decide(ctx.service, ctx.principal, 'Audit.read', { kind: 'Policy', id: '' })).Allowed)
      throw new StreamError(403, 'your credentials may not read AuditEntry objects');
    if (ctx.id !== undefined) throw new StreamError(400, 'AuditEntry is followed as a whole: omit ID');
    const db = ctx.service.db;
    let at = await auditStart(db, AUDIT_SNAPSHOT);
    let closed = false;
    let busy: Promise<void> = Promise.resolve();
    const pump = () => {
      busy = busy
        .then(async () => {
          while (!closed) {
            const rows = await auditAfter(db, at);
            for (const r of rows) {
              at = r.at;
              if (!ctx.send({ ID: r.id, Item: JSON.parse(r.data) as Record<string, unknown> })) closed = true;
            }
            if (rows.length < 1000) return;
          }
        })
        .catch((err: unknown) => ctx.logger.warn({ err, kind: AuditEntry.kind }, 'audit stream read failed'));
      return busy;
    };
    await pump();
    ctx.caughtUp();
    const wake = () => void pump();
    const auditEvents = auditEventsOf(ctx.service);
    auditEvents.on('recorded', wake);
    // Not a service job (src/core/jobs.ts): one poll per subscription, stopped when it ends.
    const timer = setInterval(wake, AUDIT_POLL_MS);
    timer.unref();
    return () => {
      closed = true;
      clearInterval(timer);
      auditEvents.off('recorded', wake);
    };
  },
};
