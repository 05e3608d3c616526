import type { FastifyRequest } from 'fastify';
import { perService, type ServiceContext, stateOf } from '../store/service.js';
import type { AccessCheckResponse } from '../wire/proxy.js';

/** A service session as the proxy back channel needs it. */
export interface ProxySession {
  sessionId: string;
  userId: string;
  integrityLevel: number;
  expires: Date;
  /** The position the browser last reported (POST /auth/location), for group location checks. */
  location?: { Latitude: number; Longitude: number };
}

/** What the back channel needs from the sign-in part of the service. */
export interface SessionsPort {
  /** The signed-in session of a browser request made to the service, if any. */
  current(req: FastifyRequest, ctx: ServiceContext): Promise<ProxySession | undefined>;
  /** A live session by its ID, if it still exists. */
  byId(ctx: ServiceContext, sessionId: string): Promise<ProxySession | undefined>;
  /** The sign-in page URL that comes back to `next` when done (a path here; absolute when the pages are elsewhere). */
  signinPage(ctx: ServiceContext, next: string): Promise<string>;
}

/** What the back channel needs from the groups part of the service. */
export interface MembershipsPort {
  check(
    ctx: ServiceContext,
    userId: string,
    groups: readonly string[],
    op: 'and' | 'or',
    opts: {
      next?: string;
      integrityLevel?: number;
      origin?: string;
      location?: { Latitude: number; Longitude: number };
    },
  ): Promise<AccessCheckResponse>;
  /** Records that the user used the membership (POST /groups/:id/members/:user/use). */
  markUsed(ctx: ServiceContext, groupId: string, userId: string): Promise<void>;
}

export interface Ports {
  sessions?: SessionsPort;
  memberships?: MembershipsPort;
}

/**
 * A service's ports, wired when its back channel is registered (see adapters.ts); until they are,
 * the endpoints that need them answer 503 saying what is missing rather than guessing. They
 * belong to the service (src/store/service.ts), so a test may wire one service's differently.
 */
const PORTS = perService<Ports>('back-channel ports', () => ({}));
export const portsOf = (ctx: ServiceContext): Ports => stateOf(ctx, PORTS);
