import { f } from '../schema/fields.js';
import type { ObjectType } from '../schema/type.js';
import { Account } from './account.js';
import { AccountChange } from './accountchange.js';
import { AccountChangePlan } from './accountchangeplan.js';
import { ActivationCode } from './activationcode.js';
import { APIKey } from './apikey.js';
import { App } from './app.js';
import { Group } from './group.js';
import { Membership } from './membership.js';
import { Metric } from './metric.js';
import { RemoteAgent } from './remoteagent.js';
import { Script } from './script.js';
import { ScriptLog } from './scriptlog.js';
import { Tenant } from './tenant.js';
import { User } from './user.js';
import { VirtualHost } from './virtualhost.js';
import { VouchRequest } from './vouchrequest.js';

/** Every object type the API serves. Adding a type = a file in this folder + one line here. */
const TYPES: ObjectType[] = [
  AccountChangePlan,
  AccountChange,
  Account,
  ActivationCode,
  APIKey,
  App,
  Group,
  Membership,
  Metric,
  RemoteAgent,
  ScriptLog,
  Script,
  Tenant,
  User,
  VirtualHost,
  VouchRequest,
];

// ID comes first in every body; it is server-managed.
for (const t of TYPES) t.fields = { ID: f.string({ readOnly: true }), ...t.fields };

export const objectTypes: readonly ObjectType[] = TYPES;
export const typeByKind = new Map(TYPES.map((t) => [t.kind, t]));
export const typeByPath = new Map(TYPES.map((t) => [t.path, t]));

export function typeOf(kind: string): ObjectType {
  const t = typeByKind.get(kind);
  if (!t) throw new Error(`unknown object type ${kind}`);
  return t;
}
