import { Readable } from 'node:stream';
import { stringify } from 'csv-stringify';
import { Group } from '../objects/group.js';
import { Membership } from '../objects/membership.js';
import { User } from '../objects/user.js';
import { type Doc, ZERO_TIME } from '../schema/fields.js';
import type { ObjectType } from '../schema/type.js';
import { iterateQuery } from '../store/find.js';
import type { RawListQuery } from '../store/listquery.js';
import type { ServiceContext } from '../store/service.js';
import { expiryDue, type GroupSettings, groupSettings } from './lifecycle.js';

/** The report's columns, in order (spec "Group approvals report", R-038). */
export const REPORT_COLUMNS = [
  'group_id',
  'group_name',
  'user_id',
  'user_email',
  'last_used',
  'reason',
  'approver_user_id',
  'approver_email',
  'approved_time',
  'approved_reason',
] as const;

/** Iterates the objects of a list query, page by page from the database (never all in memory). */
export async function* iterateObjects(
  ctx: ServiceContext,
  type: ObjectType,
  raw: RawListQuery,
): AsyncGenerator<Doc> {
  yield* iterateQuery(ctx.store, type, raw);
}

/** A tiny per-request cache, so a group or approver seen on many rows is read once. */
function cached<T>(load: (id: string) => Promise<T>) {
  const memo = new Map<string, Promise<T>>();
  return (id: string) => {
    let p = memo.get(id);
    if (!p) {
      p = load(id);
      if (memo.size > 10_000) memo.clear();
      memo.set(id, p);
    }
    return p;
  };
}

const time = (v: unknown) => (typeof v === 'string' && v !== ZERO_TIME ? v : '');

/**
 * Rows of the approvals report: one per approval of every ACTIVE membership (memberships that are
 * overdue for expiry are left out even before the sweep marks them). A membership holds the approval
 * that admitted it (a rejection voids earlier approvals), so an active member has one row, or none
 * when they joined a group that needed no approval by themselves.
 */
export async function* reportRows(ctx: ServiceContext): AsyncGenerator<string[]> {
  const group = cached(async (id) => {
    const g = await ctx.store.get(Group, id);
    return g ? groupSettings(g.doc) : undefined;
  });
  /** A user's e-mail address; undefined when there is no such user. */
  const email = cached(async (id) => {
    if (id === '') return undefined;
    const u = await ctx.store.get(User, id);
    return u ? String(u.doc.Email ?? '') : undefined;
  });
  const now = Date.now();
  const members = iterateObjects(ctx, Membership, {
    filter: 'State = "active"',
    order: ['GroupID', 'UserID'],
  });
  for await (const m of members) {
    const g: GroupSettings | undefined = await group(String(m.GroupID));
    if (!g || expiryDue(g, m, now)) continue;
    const userId = String(m.UserID);
    const userEmail = await email(userId);
    if (userEmail === undefined) continue;
    const approval = (m.Approval ?? {}) as Doc;
    if (time(approval.Time) === '') continue;
    const approver = String(approval.ByUserID ?? '');
    yield [
      g.ID,
      g.Name,
      userId,
      userEmail,
      time(m.LastUsed),
      String(m.Reason ?? ''),
      approver,
      (await email(approver)) ?? '',
      time(approval.Time),
      String(approval.Reason ?? ''),
    ];
  }
}

/**
 * The report as an RFC 4180 CSV stream (CRLF line ends, fields quoted when they hold a comma,
 * quote or line break). Values a spreadsheet would run as a formula (starting with =, +, -, @,
 * tab or CR) are prefixed with a single quote, since reasons are free text from users.
 */
export function reportStream(ctx: ServiceContext): Readable {
  const csv = stringify({
    header: true,
    columns: [...REPORT_COLUMNS],
    record_delimiter: '\r\n',
    escape_formulas: true,
  });
  const source = Readable.from(reportRows(ctx));
  source.on('error', (err) => csv.destroy(err));
  return source.pipe(csv);
}
