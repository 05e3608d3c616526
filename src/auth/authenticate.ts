import type { FastifyRequest } from 'fastify';
import type { ServiceContext } from '../store/service.js';
import { authenticateApiKey, presentedKey } from './apikeys.js';
import type { Principal } from './principal.js';
import { sessionAuthenticator } from './session/authenticator.js';

/**
 * One way of proving who is calling. Returns undefined when the request carries no credential
 * of this kind; throws 401 (ApiError) when it carries one that is not valid.
 */
export type Authenticator = (req: FastifyRequest, ctx: ServiceContext) => Promise<Principal | undefined>;

const apiKey: Authenticator = async (req, ctx) => {
  const key = presentedKey(
    req.headers.authorization,
    (req.query as Record<string, unknown> | undefined)?.access_token,
  );
  return key === undefined ? undefined : authenticateApiKey(ctx, key);
};

/** Tried in order; the first that recognises a credential decides. Adding a mechanism = one line here. */
export const authenticators: Authenticator[] = [apiKey, sessionAuthenticator];

export async function authenticate(req: FastifyRequest, ctx: ServiceContext): Promise<Principal | undefined> {
  for (const a of authenticators) {
    const p = await a(req, ctx);
    if (p) return p;
  }
  return undefined;
}
