import type { FastifyRequest } from 'fastify';
import { ApiError } from '../../../core/errors.js';
import type { ServiceContext } from '../../../store/service.js';
import { addressKey, chargeAttempt } from '../../throttle.js';

/**
 * A token that names no live request (e-mail link, push request). Its secret has 256 bits, so
 * guessing is hopeless and the user's own counters add no protection; charging them would let
 * anyone who knows a user ID hold up that user's real approvals with garbage. So a forged or stale
 * token is charged to the client address only (429 with X-Next-Attempt past the address policy),
 * and the user's counter is charged only for what a live token leaves to guess.
 */
export async function refuseUnknownToken(
  req: FastifyRequest,
  ctx: ServiceContext,
  what: string,
): Promise<never> {
  await chargeAttempt(ctx, [addressKey(req.ip)]);
  throw new ApiError('IncorrectCredential', `the ${what} is not valid (used, expired or never issued)`);
}
