import type { ServiceContext } from '../../store/service.js';
import { sessionByToken } from './sessions.js';

// What other parts of the service may learn of a session from its cookie token.

type Ctx = Pick<ServiceContext, 'db' | 'store'>;

export interface SessionInfo {
  sessionId: string;
  userId: string;
  deviceId: string;
  integrityLevel: number;
  /** When the session ends at the latest (absolute lifetime; idle expiry may end it sooner). */
  expires: Date;
}

/**
 * Checks a session cookie token over a back channel (the access proxy): the live session it
 * names, or undefined. Counts as activity for the idle lifetime.
 */
export async function validateSession(ctx: Ctx, token: string): Promise<SessionInfo | undefined> {
  const s = await sessionByToken(ctx, token);
  if (!s) return undefined;
  return {
    sessionId: s.id,
    userId: s.userId,
    deviceId: s.deviceId,
    integrityLevel: s.level,
    expires: new Date(s.expireTime),
  };
}
