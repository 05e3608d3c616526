import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceContext } from '../../../store/service.js';
import { mutateRequestSession } from '../../session/sessions.js';
import { CHALLENGE_MS } from './credentials.js';

/**
 * Puts a WebAuthn ceremony's challenge on the session, pending until answered or CHALLENGE_MS
 * passes. Registration (./enroll.ts) and sign-in (./signin.ts) store it the same way, so that the
 * one answer they each take back (single use) finds the same shape.
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
