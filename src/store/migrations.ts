import { type Kysely, type Migration, type MigrationProvider, Migrator, sql } from 'kysely';
import type { Db, Dialect } from './db.js';
import { LIST_INDEXES } from './listindexes.js';

/**
 * One list of migrations for both backends. Where the SQL differs, a migration branches on the
 * dialect. Never edit a released migration: add a new one.
 */
/** Text for keys: byte-order collation on PostgreSQL, so ids sort as on SQLite and keyset paging uses the index. */
const keyText = (dialect: Dialect) => (dialect === 'postgres' ? sql`text collate "C"` : sql`text`);

function migration0001(dialect: Dialect): Migration {
  return {
    async up(db: Kysely<unknown>) {
      const pg = dialect === 'postgres';
      const key = keyText(dialect);
      await db.schema
        .createTable('objects')
        .addColumn('type', key, (c) => c.notNull())
        .addColumn('id', key, (c) => c.notNull())
        .addColumn('data', 'text', (c) => c.notNull())
        .addColumn('etag', 'text', (c) => c.notNull())
        .addColumn('create_time', 'bigint', (c) => c.notNull())
        .addColumn('modify_time', 'bigint', (c) => c.notNull())
        .addColumn('secret', 'text')
        .addPrimaryKeyConstraint('objects_pk', ['type', 'id'])
        .execute();
      if (pg) {
        // Filters and ordering read fields from a parsed copy; `data` keeps the served text as written.
        await sql`ALTER TABLE objects ADD COLUMN doc jsonb GENERATED ALWAYS AS (data::jsonb) STORED`.execute(
          db,
        );
      }
      await db.schema
        .createTable('changes')
        .addColumn('seq', pg ? 'bigserial' : 'integer', (c) =>
          pg ? c.primaryKey() : c.primaryKey().autoIncrement(),
        )
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('id', 'text', (c) => c.notNull())
        .addColumn('data', 'text')
        .addColumn('etag', 'text', (c) => c.notNull())
        .addColumn('time', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('changes_type_seq').on('changes').columns(['type', 'seq']).execute();
      await db.schema
        .createTable('object_keys')
        .addColumn('type', key, (c) => c.notNull())
        .addColumn('name', key, (c) => c.notNull())
        .addColumn('value', key, (c) => c.notNull())
        .addColumn('id', key, (c) => c.notNull())
        .addPrimaryKeyConstraint('object_keys_pk', ['type', 'name', 'value'])
        .execute();
      await db.schema.createIndex('object_keys_object').on('object_keys').columns(['type', 'id']).execute();
    },
  };
}

// Sign-in state (src/auth/): server-side sessions, server keys shared by every instance, and the
// brute-force regulation counters.
function migration0002(dialect: Dialect): Migration {
  return {
    async up(db: Kysely<unknown>) {
      const key = keyText(dialect);
      await db.schema
        .createTable('sessions')
        .addColumn('id', key, (c) => c.primaryKey())
        .addColumn('token_hash', key, (c) => c.notNull().unique())
        .addColumn('user_id', key, (c) => c.notNull())
        .addColumn('device_id', 'text', (c) => c.notNull())
        .addColumn('level', 'integer', (c) => c.notNull())
        .addColumn('factors', 'text', (c) => c.notNull())
        .addColumn('data', 'text', (c) => c.notNull())
        .addColumn('create_time', 'bigint', (c) => c.notNull())
        .addColumn('last_seen', 'bigint', (c) => c.notNull())
        .addColumn('expire_time', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('sessions_user').on('sessions').columns(['user_id']).execute();
      await db.schema
        .createTable('auth_keys')
        .addColumn('name', key, (c) => c.primaryKey())
        .addColumn('value', 'text', (c) => c.notNull())
        .addColumn('create_time', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('auth_throttle')
        .addColumn('key', key, (c) => c.primaryKey())
        .addColumn('failures', 'integer', (c) => c.notNull())
        .addColumn('next_attempt', 'bigint', (c) => c.notNull())
        .addColumn('last_failure', 'bigint', (c) => c.notNull())
        .execute();
    },
  };
}

function migration0003(dialect: Dialect): Migration {
  return {
    // One-time codes of the proxy sign-in handshake: in the database, so any instance can redeem them.
    async up(db: Kysely<unknown>) {
      const key = keyText(dialect);
      await db.schema
        .createTable('proxy_signin_codes')
        .addColumn('code_hash', key, (c) => c.primaryKey())
        .addColumn('app_id', 'text', (c) => c.notNull())
        .addColumn('session_id', 'text', (c) => c.notNull())
        .addColumn('until', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('proxy_signin_codes_until')
        .on('proxy_signin_codes')
        .columns(['until'])
        .execute();
    },
  };
}

function migration0004(): Migration {
  return {
    // Change-log retention (src/store/changelog.ts): the highest sequence number pruned, one row,
    // so a reader of the log can tell that changes it never read are gone.
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('changes_pruned')
        .addColumn('id', 'integer', (c) => c.primaryKey())
        .addColumn('seq', 'bigint', (c) => c.notNull())
        .execute();
      await sql`INSERT INTO changes_pruned (id, seq) VALUES (1, 0)`.execute(db);
    },
  };
}

function migration0005(dialect: Dialect): Migration {
  return {
    // The OpenID Connect provider's state (src/oidc/): its tokens, codes, grants, sessions and
    // interactions in one table (one row per model and id), and its signing keys, encrypted.
    async up(db: Kysely<unknown>) {
      const key = keyText(dialect);
      await db.schema
        .createTable('oidc_store')
        .addColumn('model', key, (c) => c.notNull())
        .addColumn('id', key, (c) => c.notNull())
        .addColumn('payload', 'text', (c) => c.notNull())
        .addColumn('grant_id', key)
        .addColumn('uid', key)
        .addColumn('user_code', key)
        .addColumn('consumed', 'bigint')
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('oidc_store_pk', ['model', 'id'])
        .execute();
      await db.schema.createIndex('oidc_store_grant').on('oidc_store').columns(['grant_id']).execute();
      await db.schema.createIndex('oidc_store_uid').on('oidc_store').columns(['model', 'uid']).execute();
      await db.schema.createIndex('oidc_store_expires').on('oidc_store').columns(['expires_at']).execute();
      await db.schema
        .createTable('oidc_keys')
        .addColumn('kid', key, (c) => c.primaryKey())
        .addColumn('sealed', 'text', (c) => c.notNull())
        .addColumn('create_time', 'bigint', (c) => c.notNull())
        .addColumn('retire_time', 'bigint')
        .execute();
    },
  };
}

function migration0006(dialect: Dialect): Migration {
  return {
    // Reference and vouch videos (src/auth/factors/vouch/videos.ts): chunked, so they are
    // streamed in and out without holding a whole video in memory.
    async up(db: Kysely<unknown>) {
      const key = keyText(dialect);
      await db.schema
        .createTable('videos')
        .addColumn('id', key, (c) => c.primaryKey())
        .addColumn('owner', key, (c) => c.notNull())
        .addColumn('words', 'text', (c) => c.notNull())
        .addColumn('size', 'bigint', (c) => c.notNull())
        .addColumn('chunks', 'integer', (c) => c.notNull())
        .addColumn('complete', 'integer', (c) => c.notNull())
        .addColumn('create_time', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('videos_owner').on('videos').columns(['owner']).execute();
      await db.schema
        .createTable('video_chunks')
        .addColumn('video_id', key, (c) => c.notNull())
        .addColumn('seq', 'integer', (c) => c.notNull())
        .addColumn('data', dialect === 'postgres' ? 'bytea' : 'blob', (c) => c.notNull())
        .addPrimaryKeyConstraint('video_chunks_pk', ['video_id', 'seq'])
        .execute();
    },
  };
}

// The audit trail (src/audit/): its own table, written for every write request, never derived
// from (or pruned with) the change log. Rows have the objects table's shape so the list
// language (listquery.ts) runs on it unchanged.
function migration0007(dialect: Dialect): Migration {
  return {
    async up(db: Kysely<unknown>) {
      const pg = dialect === 'postgres';
      const key = keyText(dialect);
      await db.schema
        .createTable('audit_trail')
        .addColumn('seq', pg ? 'bigserial' : 'integer', (c) =>
          pg ? c.primaryKey() : c.primaryKey().autoIncrement(),
        )
        .addColumn('type', key, (c) => c.notNull())
        .addColumn('id', key, (c) => c.notNull().unique())
        .addColumn('data', 'text', (c) => c.notNull())
        .addColumn('time', 'bigint', (c) => c.notNull())
        .execute();
      if (pg)
        await sql`ALTER TABLE audit_trail ADD COLUMN doc jsonb GENERATED ALWAYS AS (data::jsonb) STORED`.execute(
          db,
        );
      await db.schema.createIndex('audit_trail_time').on('audit_trail').columns(['time']).execute();
    },
  };
}

function migration0008(dialect: Dialect): Migration {
  return {
    // Sign-in through other identity providers (src/auth/factors/oauth2rp/): who is linked to whom
    // by the provider's issuer and subject, and the flows under way (single use, short-lived).
    async up(db: Kysely<unknown>) {
      const key = keyText(dialect);
      await db.schema
        .createTable('federated_links')
        .addColumn('id', key, (c) => c.primaryKey())
        .addColumn('issuer', key, (c) => c.notNull())
        .addColumn('subject', key, (c) => c.notNull())
        .addColumn('user_id', key, (c) => c.notNull())
        .addColumn('app_id', 'text', (c) => c.notNull())
        .addColumn('email', 'text', (c) => c.notNull())
        .addColumn('create_time', 'bigint', (c) => c.notNull())
        .addColumn('last_used', 'bigint', (c) => c.notNull())
        .addUniqueConstraint('federated_links_issuer_subject', ['issuer', 'subject'])
        .execute();
      await db.schema
        .createIndex('federated_links_user')
        .on('federated_links')
        .columns(['user_id'])
        .execute();
      await db.schema
        .createTable('oauth2rp_flows')
        .addColumn('state_hash', key, (c) => c.primaryKey())
        .addColumn('app_id', 'text', (c) => c.notNull())
        .addColumn('session_id', 'text', (c) => c.notNull())
        .addColumn('link_user', 'text', (c) => c.notNull())
        .addColumn('data', 'text', (c) => c.notNull())
        .addColumn('until', 'bigint', (c) => c.notNull())
        .execute();
    },
  };
}

function migration0009(dialect: Dialect): Migration {
  return {
    // PostgreSQL: each audit entry records its transaction's id, so that the audit event stream
    // reads entries only once every transaction that could still add one before them has ended
    // (src/audit/trail.ts, auditAfter). Entries already there get the migration's own id: they
    // come before every later one. SQLite has one writer: sequence order is commit order there.
    async up(db: Kysely<unknown>) {
      if (dialect !== 'postgres') return;
      await sql`ALTER TABLE audit_trail ADD COLUMN tx xid8 NOT NULL DEFAULT pg_current_xact_id()`.execute(db);
      await db.schema.createIndex('audit_trail_tx_seq').on('audit_trail').columns(['tx', 'seq']).execute();
    },
  };
}

function migration0010(dialect: Dialect): Migration {
  return {
    // PostgreSQL: each change-log row records its transaction's id, so that writers append with
    // no lock between them and readers take rows in (tx, seq) order once every older transaction
    // has ended (src/store/logposition.ts). Rows already there get the migration's own id: they
    // come before every later one. The pruned mark becomes a place in that order too.
    async up(db: Kysely<unknown>) {
      if (dialect !== 'postgres') return;
      await sql`ALTER TABLE changes ADD COLUMN tx xid8 NOT NULL DEFAULT pg_current_xact_id()`.execute(db);
      await db.schema.createIndex('changes_tx_seq').on('changes').columns(['tx', 'seq']).execute();
      await sql`ALTER TABLE changes_pruned ADD COLUMN tx xid8 NOT NULL DEFAULT '0'`.execute(db);
    },
  };
}

function migration0011(dialect: Dialect): Migration {
  return {
    // Devices where a user completed a sign-in (src/auth/factors/devices.ts): rows of their own
    // instead of a field of the user's hidden state, so that signing in on a new device no longer
    // rewrites the User (its ETag, ModifyTime and a change event every subscriber saw). Devices
    // recorded so far move here.
    async up(db: Kysely<unknown>) {
      const key = keyText(dialect);
      await db.schema
        .createTable('trusted_devices')
        .addColumn('user_id', key, (c) => c.notNull())
        .addColumn('tag', key, (c) => c.notNull())
        .addColumn('last_used', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('trusted_devices_pk', ['user_id', 'tag'])
        .execute();
      await db.schema
        .createIndex('trusted_devices_last_used')
        .on('trusted_devices')
        .columns(['last_used'])
        .execute();
      const { rows } = await sql<{ id: string; secret: string }>`
        SELECT id, secret FROM objects WHERE type = 'User' AND secret LIKE '%"TrustedDevices"%'`.execute(db);
      for (const { id, secret } of rows) {
        const { TrustedDevices: devices, ...rest } = JSON.parse(secret) as Record<string, unknown>;
        if (devices !== null && typeof devices === 'object' && !Array.isArray(devices))
          for (const [tag, at] of Object.entries(devices))
            if (typeof at === 'number')
              await sql`INSERT INTO trusted_devices (user_id, tag, last_used) VALUES (${id}, ${tag}, ${at})`.execute(
                db,
              );
        await sql`UPDATE objects SET secret = ${JSON.stringify(rest)} WHERE type = 'User' AND id = ${id}`.execute(
          db,
        );
      }
    },
  };
}

function migration0012(dialect: Dialect): Migration {
  return {
    async up(db: Kysely<unknown>) {
      // Indexes ordering lists by the fields people sort them by (src/store/listindexes.ts).
      for (const { name, type, path } of LIST_INDEXES.filter((i) => i.migration === '0012_list_indexes')) {
        const field =
          dialect === 'postgres'
            ? `(coalesce((doc #>> '{${path}}'), '') collate "C")`
            : `coalesce(json_extract(data, '$.${path}'), '')`;
        await sql.raw(`CREATE INDEX ${name} ON objects (${field}, id) WHERE type = '${type}'`).execute(db);
      }
    },
  };
}

/** The migrations in the order they apply (their names sort in that order). */
const migrations = (dialect: Dialect): Record<string, Migration> => ({
  '0001_objects_changes': migration0001(dialect),
  '0002_auth_sessions': migration0002(dialect),
  '0003_proxy_signin_codes': migration0003(dialect),
  '0004_changes_pruned': migration0004(),
  '0005_oidc_provider': migration0005(dialect),
  '0006_vouch_videos': migration0006(dialect),
  '0007_audit_trail': migration0007(dialect),
  '0008_federated_links': migration0008(dialect),
  '0009_audit_trail_tx': migration0009(dialect),
  '0010_changes_tx': migration0010(dialect),
  '0011_trusted_devices': migration0011(dialect),
  '0012_list_indexes': migration0012(dialect),
});

class StaticProvider implements MigrationProvider {
  constructor(private readonly list: Record<string, Migration>) {}
  async getMigrations() {
    return this.list;
  }
}

/** Applies every pending migration; returns the names applied. */
export async function migrate(db: Db): Promise<string[]> {
  const migrator = new Migrator({ db: db.kysely, provider: new StaticProvider(migrations(db.dialect)) });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

export interface MigrationStatus {
  name: string;
  /** When it was applied (ISO 8601); undefined while pending. */
  appliedAt?: string;
}

/** Every migration this version knows, in order, with when each was applied (`gatehouse migrate --status`). */
export async function migrationStatus(db: Db): Promise<MigrationStatus[]> {
  const migrator = new Migrator({ db: db.kysely, provider: new StaticProvider(migrations(db.dialect)) });
  return (await migrator.getMigrations()).map((m) => ({
    name: m.name,
    ...(m.executedAt ? { appliedAt: m.executedAt.toISOString() } : {}),
  }));
}
