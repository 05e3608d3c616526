import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../../core/errors.js';
import type { ServiceContext } from '../../../store/service.js';
import { mutateRequestSession, requestSession } from '../../session/sessions.js';
import { CHALLENGE_MS } from './credentials.js';

/**
 * Puts a WebAuthn ceremony's challenge on the session, pending until answered or CHALLENGE_MS
 * passes. Registration (./enroll.ts) and sign-in (./signin.ts) store it the same way, so that the
 * one answer they each take back (single use, takeChallenge) finds the same shape.
 */
export async function storeChallenge(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: ServiceContext,
  sessionId: string,
  pending: { challenge: string; userId: string; purpose: 'signin' | 'register' },
): Promise<void> {
  await mutateRequestSession(req, reply, ctx, sessionId, (cur) => ({
    ...cur,
    data: {
      ...cur.data,
      WebAuthn: {
        Challenge: pending.challenge,
        Expires: Date.now() + CHALLENGE_MS,
        UserID: pending.userId,
        Purpose: pending.purpose,
      },
    },
  }));
}

/** What a ceremony's answer may go with, and what to say when it may not (status, words). */
interface Expected {
  purpose: 'signin' | 'register';
  /** Registration: the challenge must be the changed user's. */
  userId?: string;
  /** The error kind of a missing, spent or expired challenge. */
  kind: 'BadRequest' | 'Conflict';
  missing: string;
  spent: string;
  expired: string;
}

/**
 * Takes the session's pending challenge for this purpose: it can be answered once, whatever the
 * outcome (it goes from the session before the answer is checked), and only before it expires.
 */
export async function takeChallenge(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: ServiceContext,
  want: Expected,
) {
  const { session } = await requestSession(req, ctx);
  const pending = session?.data.WebAuthn;
  if (
    !session ||
    !pending ||
    pending.Purpose !== want.purpose ||
    (want.userId !== undefined && pending.UserID !== want.userId)
  )
    throw new ApiError(want.kind, want.missing);
  const after = await mutateRequestSession(req, reply, ctx, session.id, (cur) => {
    if (cur.data.WebAuthn?.Challenge !== pending.Challenge) throw new ApiError(want.kind, want.spent);
    const { WebAuthn: _, ...data } = cur.data;
    return { ...cur, data };
  });
  if (pending.Expires < Date.now()) throw new ApiError(want.kind, want.expired);
  return { session: after, pending };
}
