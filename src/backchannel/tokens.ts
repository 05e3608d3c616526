import { createHash, randomBytes } from 'node:crypto';
import { ApiError } from '../core/errors.js';
import { App } from '../objects/app.js';
import { RemoteAgent } from '../objects/remoteagent.js';
import type { Actor } from '../policy/actor.js';
import { enforce } from '../policy/decide.js';
import { normalizeTimestamp } from '../schema/fields.js';
import type { ServiceContext } from '../store/service.js';

/** Proxy tokens are kept as SHA-256 hashes (the token has 256 random bits: no stretching needed). */
export const tokenHash = (s: string) => createHash('sha256').update(s).digest('base64url');

/** Issues (or replaces) the token tying a proxy or agent to an App; returns it (shown once). */
export async function issueProxyToken(ctx: ServiceContext, actor: Actor, appId: string): Promise<string> {
  await enforce(ctx, actor, 'App.proxytoken', { kind: App.kind, id: appId });
  if (!(await ctx.store.get(App, appId))) throw new ApiError('NotFound', `App ${appId} does not exist`);
  const token = `gp.${appId}.${randomBytes(32).toString('base64url')}`;
  const saved = await ctx.store.systemPut(App, appId, (doc, secret) =>
    doc
      ? { doc: { ...doc, HaveProxyToken: true }, secret: { ...secret, ProxyTokenHash: tokenHash(token) } }
      : null,
  );
  if (!saved) throw new ApiError('NotFound', `App ${appId} does not exist`);
  return token;
}

/** The RemoteAgent of a proxy or agent: one per App and name. */
export const remoteAgentId = (appId: string, name: string) =>
  createHash('sha256').update(`${appId}\n${name}`).digest('hex').slice(0, 14);

/** Records that a proxy of App `appId` (authenticated by its token) registered; returns its RemoteAgent ID. */
export async function recordProxy(
  ctx: ServiceContext,
  appId: string,
  seen: { name: string; version: string; address: string },
): Promise<string> {
  const agentId = remoteAgentId(appId, seen.name);
  await ctx.store.systemPut(RemoteAgent, agentId, () => ({
    doc: {
      Name: seen.name,
      Kind: 'proxy',
      Version: seen.version.slice(0, 64),
      Address: seen.address.slice(0, 512),
      AppID: appId,
      LastSeen: normalizeTimestamp(new Date().toISOString()),
    },
  }));
  return agentId;
}
