import { ApiError } from '../core/errors.js';
import { enforce } from '../policy/decide.js';
import { checkFieldRules, FIELD_RULES } from '../policy/grants.js';
import { whileAdministratorsHeld } from '../policy/rules.js';
import { type Doc, defaultOf, normalize, refuseFractionalSeconds } from '../schema/fields.js';
import { bodyFields, type ObjectType } from '../schema/type.js';
import { etagMatches, type StoredObject } from '../store/objects.js';
import type { ServiceContext } from '../store/service.js';
import type { ObjectWriter, WriteRequest, WriteResult } from '../store/writer.js';
import { afterObjectWrite, beforeObjectWrite } from './hooks.js';

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** RFC 7396 JSON Merge Patch: null removes a member (here: back to its default), objects merge, the rest replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return patch;
  const out: Record<string, unknown> = isPlainObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

const defaultsOf = (type: ObjectType): Doc =>
  Object.fromEntries(Object.entries(type.fields).map(([k, f]) => [k, defaultOf(f)]));

/**
 * The one write path (docs/architecture.md, "Writes"): every object write by any caller comes
 * here. In order: load the stored object once; decide (src/policy: the scope grant, ownership, the
 * privilege ceiling, the last administrator); apply the field rules to the body as it would be
 * stored; run the before-hooks (user-write scripts; what they set is decided again); store,
 * conditional on the ETag that was checked, so a change in between fails with 412; then the
 * after-hooks (group-membership scripts). Events follow from the change log; the audit trail
 * records the request that asked.
 */
export class WritePath implements ObjectWriter {
  constructor(private readonly ctx: ServiceContext) {}

  async write(req: WriteRequest): Promise<WriteResult> {
    return req.op === 'create' ? this.create(req) : req.op === 'delete' ? this.remove(req) : this.update(req);
  }

  /** The object the write is against: missing is 404 (the caller's grant was already checked). */
  private async load(req: WriteRequest): Promise<StoredObject> {
    const id = req.id ?? '';
    const existing = await this.ctx.store.get(req.type, id);
    if (!existing) {
      await enforce(this.ctx, req.actor, `${req.type.kind}.${req.op === 'patch' ? 'update' : req.op}`, {
        kind: req.type.kind,
        id,
      });
      throw new ApiError('NotFound', `${req.type.kind} ${id} does not exist`);
    }
    return existing;
  }

  /**
   * The ETag to write against: the loaded one when the caller's matches, so a change after the
   * decision fails (412); the caller's own otherwise, which the store refuses (412).
   */
  private etagFor(req: WriteRequest, existing: StoredObject): string {
    const ifMatch = req.ifMatch ?? existing.etag;
    return etagMatches(ifMatch, existing.etag, false) ? existing.etag : ifMatch;
  }

  /** The body as it would be stored (400 for a malformed one), for the rules to judge. */
  private proposed(type: ObjectType, body: unknown, previous: Doc | undefined): Doc {
    const fields = bodyFields(type);
    refuseFractionalSeconds(fields, body);
    return normalize(fields, body ?? {}, previous);
  }

  private async judge(req: WriteRequest, op: 'create' | 'update', body: unknown, existing?: StoredObject) {
    const proposed = this.proposed(req.type, body, existing?.doc);
    const id = existing?.id ?? req.id ?? '';
    await enforce(this.ctx, req.actor, `${req.type.kind}.${op}`, {
      kind: req.type.kind,
      id,
      doc: existing?.doc,
      body: { ...proposed, ID: id },
    });
    if (FIELD_RULES[req.type.kind] && !req.actor.scopes.has('admin'))
      checkFieldRules(req.actor, req.type.kind, proposed, existing?.doc, defaultsOf(req.type));
  }

  private async create(req: WriteRequest): Promise<WriteResult> {
    const { ctx } = this;
    await enforce(ctx, req.actor, `${req.type.kind}.create`, { kind: req.type.kind, id: req.id ?? '' });
    if (req.refusal) throw req.refusal;
    let body = req.body ?? {};
    await this.judge(req, 'create', body);
    const set = await beforeObjectWrite(ctx, req.actor, req.type, undefined, body, undefined);
    if (set) {
      body = set;
      await this.judge(req, 'create', body);
    }
    const { obj, response } = await ctx.store.create(
      req.type,
      body,
      req.id,
      { userId: req.actor.userId },
      req.auditRow,
    );
    await afterObjectWrite(ctx, req.type, obj, true);
    return { obj, changed: true, response };
  }

  private async update(req: WriteRequest): Promise<WriteResult> {
    const { ctx } = this;
    await enforce(ctx, req.actor, `${req.type.kind}.update`, { kind: req.type.kind, id: req.id ?? '' });
    const loaded = await this.load(req);
    return whileAdministratorsHeld(ctx, req.type.kind, loaded.doc, async (held) =>
      this.updateLoaded(req, held ? await this.load(req) : loaded),
    );
  }

  private async updateLoaded(req: WriteRequest, existing: StoredObject): Promise<WriteResult> {
    const { ctx } = this;
    if (req.refusal) throw req.refusal;
    let body = req.op === 'patch' ? mergePatch(existing.doc, req.body ?? {}) : (req.body ?? {});
    await this.judge(req, 'update', body, existing);
    const etag = this.etagFor(req, existing);
    if (etag === existing.etag) {
      const set = await beforeObjectWrite(ctx, req.actor, req.type, existing.id, body, existing.doc);
      if (set) {
        body = set;
        await this.judge(req, 'update', body, existing);
      }
    }
    const { obj, changed } = await ctx.store.update(
      req.type,
      existing.id,
      body,
      etag,
      { userId: req.actor.userId },
      req.auditRow,
    );
    if (changed) await afterObjectWrite(ctx, req.type, obj, false);
    return { obj, changed };
  }

  private async remove(req: WriteRequest): Promise<WriteResult> {
    const { ctx } = this;
    await enforce(ctx, req.actor, `${req.type.kind}.delete`, { kind: req.type.kind, id: req.id ?? '' });
    const loaded = await this.load(req);
    return whileAdministratorsHeld(ctx, req.type.kind, loaded.doc, async (held) => {
      const existing = held ? await this.load(req) : loaded;
      // Decided on the object as loaded, whatever the ETag: a stale one is answered 412 only to a
      // caller who may act on the object at all.
      await enforce(ctx, req.actor, `${req.type.kind}.delete`, {
        kind: req.type.kind,
        id: existing.id,
        doc: existing.doc,
      });
      await ctx.store.delete(req.type, existing.id, this.etagFor(req, existing), req.auditRow);
      return { obj: undefined, changed: true };
    });
  }
}
