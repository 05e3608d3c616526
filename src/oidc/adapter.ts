import { sql } from 'kysely';
import { type Adapter, type AdapterPayload, errors } from 'oidc-provider';
import { perService, type ServiceContext, stateOf } from '../store/service.js';
import { oidcDb } from './db.js';

/** Models whose rows belong to a grant: revoking the grant deletes them all. */
const GRANTABLE = new Set([
  'AccessToken',
  'AuthorizationCode',
  'RefreshToken',
  'DeviceCode',
  'BackchannelAuthenticationRequest',
]);
/** Single-use models: a second use revokes the whole grant (code replay, refresh-token reuse). */
const SINGLE_USE = new Set(['AuthorizationCode', 'RefreshToken', 'DeviceCode']);
/** Rows without a lifetime (none in practice) are kept for a year. */
const DEFAULT_TTL_S = 365 * 86400;
/** One write in this many also deletes rows whose lifetime has passed. */
const SWEEP_EVERY = 100;

type AdapterOwner = Pick<ServiceContext, 'db' | 'state'>;
/** The service's writes to oidc_store, counted for the sweep (src/store/service.ts). */
const WRITES = perService<{ count: number }, AdapterOwner>('OpenID Connect store writes', () => ({
  count: 0,
}));

/**
 * oidc-provider's storage on Gatehouse's database (table oidc_store of migration 0004), so codes,
 * tokens, grants, sessions and interactions are shared by every service instance on the same
 * database. A row whose expires_at has passed is treated as absent at once and deleted later.
 *
 * Two things are stricter than the library's reference adapter:
 * - consume() is atomic (UPDATE ... WHERE consumed IS NULL): when two requests present the same
 *   code or refresh token at once, only one wins; the loser revokes the grant (the token family)
 *   and fails with invalid_grant, as a sequential reuse does in oidc-provider itself.
 * - a token of a grant is stored only while its Grant row exists, so a token issued by a request
 *   that raced with a revocation cannot outlive the revocation.
 */
export class StoreAdapter implements Adapter {
  constructor(
    private readonly ctx: AdapterOwner,
    private readonly model: string,
  ) {}

  private get db() {
    return oidcDb(this.ctx);
  }

  async upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void> {
    const now = Date.now();
    const ttl = Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn : DEFAULT_TTL_S;
    const row = {
      model: this.model,
      id,
      payload: JSON.stringify(payload),
      grant_id: GRANTABLE.has(this.model) && payload.grantId ? payload.grantId : null,
      uid: this.model === 'Session' && payload.uid ? payload.uid : null,
      user_code: payload.userCode ?? null,
      consumed: null,
      expires_at: now + ttl * 1000,
    };
    const db = this.db;
    if (row.grant_id) {
      // Only while the grant lives (see the class comment).
      const grant = row.grant_id;
      await db
        .insertInto('oidc_store')
        .columns(['model', 'id', 'payload', 'grant_id', 'uid', 'user_code', 'consumed', 'expires_at'])
        .expression(
          db
            .selectFrom('oidc_store as g')
            .select([
              sql<string>`cast(${row.model} as text)`.as('model'),
              sql<string>`cast(${row.id} as text)`.as('id'),
              sql<string>`cast(${row.payload} as text)`.as('payload'),
              sql<string>`cast(${grant} as text)`.as('grant_id'),
              sql<null>`null`.as('uid'),
              sql<string | null>`cast(${row.user_code} as text)`.as('user_code'),
              sql<null>`null`.as('consumed'),
              sql<number>`cast(${row.expires_at} as bigint)`.as('expires_at'),
            ])
            .where('g.model', '=', 'Grant')
            .where('g.id', '=', grant)
            .where('g.expires_at', '>', now),
        )
        .onConflict((oc) =>
          oc.columns(['model', 'id']).doUpdateSet({
            payload: row.payload,
            expires_at: row.expires_at,
            user_code: row.user_code,
          }),
        )
        .execute();
    } else {
      await db
        .insertInto('oidc_store')
        .values(row)
        .onConflict((oc) =>
          oc.columns(['model', 'id']).doUpdateSet({
            payload: row.payload,
            expires_at: row.expires_at,
            uid: row.uid,
            user_code: row.user_code,
          }),
        )
        .execute();
    }
    if (++stateOf(this.ctx, WRITES).count % SWEEP_EVERY === 0) await sweep(this.ctx);
  }

  private async findWhere(column: 'id' | 'uid' | 'user_code', value: string) {
    const row = await this.db
      .selectFrom('oidc_store')
      .select(['payload', 'consumed'])
      .where('model', '=', this.model)
      .where(column, '=', value)
      .where('expires_at', '>', Date.now())
      .executeTakeFirst();
    if (!row) return undefined;
    const payload = JSON.parse(row.payload) as AdapterPayload;
    return row.consumed === null ? payload : { ...payload, consumed: Number(row.consumed) };
  }

  find(id: string) {
    return this.findWhere('id', id);
  }
  findByUid(uid: string) {
    return this.findWhere('uid', uid);
  }
  findByUserCode(userCode: string) {
    return this.findWhere('user_code', userCode);
  }

  async consume(id: string): Promise<void> {
    const res = await this.db
      .updateTable('oidc_store')
      .set({ consumed: Math.floor(Date.now() / 1000) })
      .where('model', '=', this.model)
      .where('id', '=', id)
      .where('consumed', 'is', null)
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) === 1 || !SINGLE_USE.has(this.model)) return;
    // Someone else used it between our read and now: a reuse, even if it was concurrent.
    const row = await this.db
      .selectFrom('oidc_store')
      .select('grant_id')
      .where('model', '=', this.model)
      .where('id', '=', id)
      .executeTakeFirst();
    if (row?.grant_id) await this.revokeByGrantId(row.grant_id);
    throw new errors.InvalidGrant(
      `${this.model === 'RefreshToken' ? 'refresh token' : 'grant'} already used`,
    );
  }

  async destroy(id: string): Promise<void> {
    await this.db.deleteFrom('oidc_store').where('model', '=', this.model).where('id', '=', id).execute();
  }

  async revokeByGrantId(grantId: string): Promise<void> {
    await this.db
      .deleteFrom('oidc_store')
      .where((eb) =>
        eb.or([eb('grant_id', '=', grantId), eb.and([eb('model', '=', 'Grant'), eb('id', '=', grantId)])]),
      )
      .execute();
  }
}

/** Deletes rows whose lifetime has passed. */
export async function sweep(ctx: Pick<ServiceContext, 'db'>): Promise<void> {
  await oidcDb(ctx).deleteFrom('oidc_store').where('expires_at', '<=', Date.now()).execute();
}
