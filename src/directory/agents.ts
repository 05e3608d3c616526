import { createHash } from 'node:crypto';
import { nowStamp } from '../groups/lifecycle.js';
import { RemoteAgent } from '../objects/remoteagent.js';
import { timestampMs } from '../schema/fields.js';
import type { ObjectStore } from '../store/objects.js';
import { allOf } from './queries.js';

/** Agents report at least this often (proxies register every 5 minutes; agents claim). */
export const HEARTBEAT_MS = 5 * 60_000;
/** An agent silent for three heartbeats shows as stale. */
export const STALE_AFTER_MS = 3 * HEARTBEAT_MS;

export const provisioningAgentId = (appId: string, name: string) =>
  createHash('sha256').update(`${appId}\nprovisioning:${name}`).digest('hex').slice(0, 14);

/** Records a provisioning agent's report (each claim is one): version, address, last seen. */
export async function heartbeat(
  store: ObjectStore,
  appId: string,
  name: string,
  version: string,
  address: string,
): Promise<string> {
  const id = provisioningAgentId(appId, name);
  await store.systemPut(RemoteAgent, id, () => ({
    doc: {
      Name: name,
      Kind: 'provisioning',
      Version: version,
      Address: address,
      AppID: appId,
      LastSeen: nowStamp(),
      Health: 'ok',
    },
  }));
  return id;
}

/** Marks agents silent for STALE_AFTER_MS as stale (and reporting ones ok); run periodically. */
export async function markStaleAgents(store: ObjectStore, now = Date.now()): Promise<void> {
  for (const a of await allOf(store, RemoteAgent)) {
    const health = now - timestampMs(String(a.LastSeen)) > STALE_AFTER_MS ? 'stale' : 'ok';
    if (a.Health !== health)
      await store.systemPut(RemoteAgent, String(a.ID), (doc) =>
        doc ? { doc: { ...doc, Health: health } } : null,
      );
  }
}
