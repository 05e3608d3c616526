import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { User } from '../../../objects/user.js';
import type { Doc } from '../../../schema/fields.js';
import type { ServiceContext } from '../../../store/service.js';
import type { RequestingDevice } from './device.js';

/**
 * Pending sign-in links, kept in the user's hidden state (`OtpLinks`): only the SHA-256 of each
 * link's secret (256 random bits, so a fast hash is enough: nothing to brute-force), the session
 * that asked, the address it went to, what the asking device looked like, and when it expires.
 * A link is spent (removed) by its first use, approval or refusal alike.
 */
export interface PendingLink {
  Hash: string;
  SessionID: string;
  Email: string;
  Time: string;
  Expires: number;
  Device: RequestingDevice;
}

/** How long a link works. */
export const LINK_TTL_MS = 10 * 60_000;
/** At most this many links wait per user; a new one pushes out the oldest. */
export const MAX_PENDING = 5;

const digest = (secret: string) => createHash('sha256').update(secret).digest();

/** A link token: `<user ID>.<secret>`. The user ID says where to look; the secret is the proof. */
export function newToken(userId: string): { token: string; hash: string } {
  const secret = randomBytes(32).toString('base64url');
  return { token: `${userId}.${secret}`, hash: digest(secret).toString('base64url') };
}

const TOKEN = /^([a-z0-9]{1,64})\.([A-Za-z0-9_-]{43})$/;

/** The user ID and secret of a well-formed token, or undefined. */
export function parseToken(token: string): { userId: string; secret: string } | undefined {
  const m = TOKEN.exec(token);
  return m ? { userId: m[1] as string, secret: m[2] as string } : undefined;
}

export const pendingLinks = (secret: Doc): PendingLink[] =>
  Array.isArray(secret.OtpLinks) ? (secret.OtpLinks as unknown as PendingLink[]) : [];

const live = (links: PendingLink[], now: number) => links.filter((l) => l.Expires > now);

/** Stores a new link for the user (expired ones and the oldest beyond MAX_PENDING dropped). */
export async function addLink(ctx: ServiceContext, userId: string, link: PendingLink): Promise<void> {
  await ctx.store.systemPut(User, userId, (doc, s) => {
    if (!doc) return null;
    const kept = live(pendingLinks(s), Date.now()).slice(-(MAX_PENDING - 1));
    return { doc, secret: { ...s, OtpLinks: [...kept, link] as unknown as Doc[] } };
  });
}

/** The live link matching a secret (compared in constant time), without spending it. */
export function findLink(secret: Doc, given: string, now = Date.now()): PendingLink | undefined {
  const want = digest(given);
  let hit: PendingLink | undefined;
  for (const l of live(pendingLinks(secret), now)) {
    const have = Buffer.from(l.Hash, 'base64url');
    if (have.length === want.length && timingSafeEqual(have, want)) hit = l;
  }
  return hit;
}

/** Spends the link matching `given`: removed in the same write that finds it, so it works once. */
export async function spendLink(
  ctx: ServiceContext,
  userId: string,
  given: string,
): Promise<PendingLink | undefined> {
  let spent: PendingLink | undefined;
  await ctx.store.systemPut(User, userId, (doc, s) => {
    if (!doc) return null;
    const now = Date.now();
    spent = findLink(s, given, now);
    const rest = live(pendingLinks(s), now).filter((l) => l !== spent);
    return { doc, secret: { ...s, OtpLinks: rest as unknown as Doc[] } };
  });
  return spent;
}

/** Drops a link that could not be sent. */
export async function dropLink(ctx: ServiceContext, userId: string, hash: string): Promise<void> {
  await ctx.store.systemPut(User, userId, (doc, s) =>
    doc
      ? {
          doc,
          secret: { ...s, OtpLinks: pendingLinks(s).filter((l) => l.Hash !== hash) as unknown as Doc[] },
        }
      : null,
  );
}
