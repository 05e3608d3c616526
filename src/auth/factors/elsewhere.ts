import { ApiError } from '../../core/errors.js';
import type { ServiceContext } from '../../store/service.js';
import { completeSignIn } from '../session/complete.js';
import { mutateSession, sessionById } from '../session/sessions.js';

/**
 * An approval given on another device (an e-mail link opened, a phone's push approved) proves
 * `factor` for the session that asked, never for the device that approved, and only while that
 * session is still the same user's. Its level changed from elsewhere, so its token changes at its
 * next request (fixation defence). 409 when the session that asked has ended or changed user.
 */
export async function proveForAskingSession(
  ctx: ServiceContext,
  sessionId: string,
  userId: string,
  factor: string,
  ended: string,
): Promise<void> {
  const asking = await sessionById(ctx, sessionId);
  if (!asking || asking.userId !== userId) throw new ApiError('SessionConflict', ended);
  // The one sign-in completion, for the session that asked (its own client for the scripts).
  const checked = await completeSignIn(ctx, asking, { factor });
  const raised = await mutateSession(
    ctx,
    sessionId,
    (cur) =>
      cur.userId !== userId
        ? cur
        : {
            ...cur,
            factors: cur.factors.includes(factor) ? cur.factors : [...cur.factors, factor],
            data: { ...cur.data, ...checked, RotatePending: true },
          },
    { rotate: false },
  );
  if (!raised || raised.session.userId !== userId) throw new ApiError('SessionConflict', ended);
}
