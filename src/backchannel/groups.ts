import { Membership } from '../objects/membership.js';
import { membershipCounts } from '../policy/memberships.js';
import { parseListQuery } from '../store/listquery.js';
import type { ServiceContext } from '../store/service.js';

/** At most this many group IDs go to a proxy (they ride in its session cookie and the assertion). */
export const MAX_IDENTITY_GROUPS = 64;

/**
 * The groups whose membership counts for this user now, as an access check would count it:
 * active, not overdue, and `level` (the session's; 0 for an API key) reaching the group's
 * IntegrityLevel. For the proxy's identity assertion (docs/federation.md).
 */
export async function countingGroups(ctx: ServiceContext, userId: string, level: number): Promise<string[]> {
  const page = await ctx.store.list(
    Membership,
    parseListQuery(Membership, { filter: [`UserID = ${JSON.stringify(userId)}`, 'State = "active"'] }),
  );
  const candidates: string[] = [];
  for await (const chunk of page.chunks)
    for (const line of chunk.split('\n')) {
      if (!line) continue;
      const { Item } = JSON.parse(line) as { Item: { GroupID?: unknown } };
      if (typeof Item.GroupID === 'string') candidates.push(Item.GroupID);
    }
  const out: string[] = [];
  for (const g of candidates.sort()) {
    if (out.length >= MAX_IDENTITY_GROUPS) break;
    if (await membershipCounts(ctx, g, userId, { level })) out.push(g);
  }
  return out;
}
