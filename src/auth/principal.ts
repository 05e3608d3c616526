import type { Scope } from '../objects/apikey.js';

/** Who is calling, however they proved it. Sessions (a later factor set) produce the same shape. */
export interface Principal {
  via: 'apikey' | 'session';
  /** The user acted for; '' for a key that belongs to no user. */
  userId: string;
  scopes: ReadonlySet<Scope>;
  /** The APIKey's ID when via is apikey. */
  keyId?: string;
}
