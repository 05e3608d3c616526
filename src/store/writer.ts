import type { Doc } from '../schema/fields.js';
import type { Principal } from '../schema/principal.js';
import type { ObjectType } from '../schema/type.js';
import type { AuditRowFor } from './auditrow.js';
import type { StoredObject } from './objects.js';

/**
 * One object write by any caller: what the one write path (src/writes/path.ts) takes. `patch`
 * is a JSON Merge Patch (RFC 7396) applied to the stored object. `ifMatch` is the ETag the caller
 * saw; the service's own writes (actor SYSTEM) may leave it out.
 */
export interface WriteRequest {
  actor: Principal;
  type: ObjectType;
  op: 'create' | 'update' | 'patch' | 'delete';
  id?: string | undefined;
  body?: unknown;
  ifMatch?: string | undefined;
  /**
   * The HTTP route's schema refused the body (src/api/objects.ts): answered where the body is
   * judged, after the decision and the 404 that the spec orders before it.
   */
  refusal?: Error | undefined;
  /** The request's audit entry, written by the write's own statement when it writes anything. */
  auditRow?: AuditRowFor | undefined;
}

export interface WriteResult {
  /** The stored object after the write (undefined after a delete). */
  obj: StoredObject | undefined;
  /** False when an update changed nothing (304). */
  changed: boolean;
  /** Extra response fields of a create (an APIKey's secret). */
  response?: Doc | undefined;
}

/** The one write path, as the layers below features see it (ServiceContext.writes). */
export interface ObjectWriter {
  write(req: WriteRequest): Promise<WriteResult>;
}
