import type { Kysely } from 'kysely';
import type { ServiceContext } from '../store/service.js';

/** Tables of migration 0005_oidc_provider (src/store/migrations.ts). */
export interface OidcStoreTable {
  /** oidc-provider's model name: AccessToken, AuthorizationCode, RefreshToken, Grant, Session, ... */
  model: string;
  id: string;
  /** The model's payload as JSON. */
  payload: string;
  /** Tokens and codes of one grant: revoked together (revocation, refresh-token or code reuse). */
  grant_id: string | null;
  /** Sessions are also found by their uid. */
  uid: string | null;
  user_code: string | null;
  /** Epoch seconds when a code or refresh token was used; null while unused. */
  consumed: number | string | null;
  /** Epoch milliseconds after which the row does not exist (rows are swept later). */
  expires_at: number | string;
}

export interface OidcKeysTable {
  kid: string;
  /** The private JWK, AES-256-GCM encrypted with the key-encryption key (keys.ts). */
  sealed: string;
  create_time: number | string;
  /** When a newer key took over signing; the key is published until its last token expires. */
  retire_time: number | string | null;
}

export type OidcTables = { oidc_store: OidcStoreTable; oidc_keys: OidcKeysTable };

export const oidcDb = (ctx: Pick<ServiceContext, 'db'>): Kysely<OidcTables> =>
  ctx.db.kysely.withTables<OidcTables>() as unknown as Kysely<OidcTables>;
