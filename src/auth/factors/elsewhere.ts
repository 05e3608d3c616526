import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '../../core/errors.js';
import type { RouteSchema } from '../../core/routeschema.js';
import type { ServiceContext } from '../../store/service.js';
import { completeSignIn } from '../session/complete.js';
import { deleteSession, mutateSession, sessionById } from '../session/sessions.js';
import { FLOW } from './factor.js';

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

/** A request answered on another device: which session asked, for whom, from where. */
export interface Answered {
  sessionId: string;
  userId: string;
  /** The asking client's address, for the log of a refusal. */
  address: string;
}

/**
 * The two answers to a request sent elsewhere (an e-mail link, a push), the same for every such
 * factor: approving proves the factor for the session that asked; refusing ends that session and
 * is logged as a warning. `spend` finds the request the form's token names, under regulation,
 * and spends it (an answer is given once).
 */
export interface AnswerRoutes {
  factor: string;
  approve: { url: string; schema: RouteSchema };
  refuse: { url: string; schema: RouteSchema };
  spend(req: FastifyRequest, action: 'approve' | 'refuse'): Promise<Answered>;
  /** 409's message when the asking session is gone. */
  ended: string;
  /** The log line of a refusal. */
  refused: string;
}

export function registerAnswers(app: FastifyInstance, ctx: ServiceContext, spec: AnswerRoutes): void {
  app.post(spec.approve.url, { ...FLOW, schema: spec.approve.schema }, async (req, reply) => {
    const a = await spec.spend(req, 'approve');
    // The session that asked gets the factor, whoever answered: the answering browser gets nothing.
    await proveForAskingSession(ctx, a.sessionId, a.userId, spec.factor, spec.ended);
    return reply.code(204).send();
  });
  app.post(spec.refuse.url, { ...FLOW, schema: spec.refuse.schema }, async (req, reply) => {
    const a = await spec.spend(req, 'refuse');
    const asking = await sessionById(ctx, a.sessionId);
    if (asking && asking.userId === a.userId) await deleteSession(ctx, asking.id);
    req.log.warn({ userId: a.userId, session: a.sessionId, address: a.address }, spec.refused);
    return reply.code(204).send();
  });
}
