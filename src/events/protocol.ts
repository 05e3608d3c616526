/**
 * The wire format of GET /events (docs/events.md): client messages are EventStreamRequest,
 * server frames are ListItem, in the PascalCase shape the lists use (ID, Item, StatusCode,
 * StatusText) plus Kind, which names the subscription a frame belongs to.
 */

import { unstorable } from '../core/text.js';

/** A client message. */
export interface EventStreamRequest {
  Kind: string;
  ID?: string;
}

/** A server frame. */
export interface ListItemFrame {
  /** The object's ID; "" for the catch-up marker and for frames about the connection itself. */
  ID: string;
  /** The object; {} for a deletion, the catch-up marker and status frames. */
  Item: Record<string, unknown>;
  /** The subscription's Kind; absent on frames about the whole connection. */
  Kind?: string;
  StatusCode?: number;
  StatusText?: string;
}

/** Close codes the server uses (1000-1011 are the RFC 6455 meanings). */
export const CloseCodes = {
  /** After the StatusCode 100 "Integrity Level Changed" frame: reconnect at once. */
  IntegrityChanged: 1000,
  /** The server is shutting down. */
  GoingAway: 1001,
  /** More than 256 client messages waiting to be handled. */
  PolicyViolation: 1008,
  /** A client message larger than the limit (sent by ws itself). */
  MessageTooBig: 1009,
  /** Unexpected server error. */
  Internal: 1011,
  /** The credentials the stream was opened with are no longer valid (key deleted or changed, user disabled, key expired, session ended). */
  CredentialsRevoked: 4001,
  /** The client does not read fast enough: its send buffer passed the limit. */
  SlowConsumer: 4008,
  /** After the StatusCode 205 "Reset Content" frame: changes were lost; reconnect and resubscribe. */
  Resync: 4009,
} as const;

export const INTEGRITY_CHANGED = { StatusCode: 100, StatusText: 'Integrity Level Changed' } as const;

/**
 * Changes this stream should have carried are gone from the change log (pruned before this
 * instance read them): what the client holds may be stale. It discards it, reconnects and
 * subscribes again, and the snapshot and catch-up marker bring it up to date.
 */
export const RESYNC = { StatusCode: 205, StatusText: 'Reset Content' } as const;

/** An error answered as a frame (the connection stays open). */
export class StreamError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'StreamError';
  }
}

/** The frame of a stored object (data is its JSON text) or, when data is null, of its deletion. */
export function objectFrame(kind: string, id: string, data: string | null): Buffer {
  return Buffer.from(`{"ID":${JSON.stringify(id)},"Item":${data ?? '{}'},"Kind":${JSON.stringify(kind)}}`);
}

export function markerFrame(kind: string): ListItemFrame {
  return { ID: '', Item: {}, Kind: kind };
}

/** An error frame for a request; Kind and ID echo the request when they were readable. */
export function errorFrame(
  status: number,
  text: string,
  req?: { Kind?: unknown; ID?: unknown },
): ListItemFrame {
  const frame: ListItemFrame = { ID: typeof req?.ID === 'string' ? req.ID : '', Item: {} };
  if (typeof req?.Kind === 'string') frame.Kind = req.Kind;
  frame.StatusCode = status;
  frame.StatusText = text;
  return frame;
}

const REQUEST_FIELDS = new Set(['Kind', 'ID']);

/** Parses and validates a client message; throws StreamError(400) with a clear text. */
export function parseRequest(text: string): EventStreamRequest {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new StreamError(400, 'malformed JSON: send an EventStreamRequest such as {"Kind":"User"}');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new StreamError(400, 'an EventStreamRequest must be a JSON object such as {"Kind":"User"}');
  const obj = value as Record<string, unknown>;
  const unknown = Object.keys(obj).filter((k) => !REQUEST_FIELDS.has(k));
  if (unknown.length > 0)
    throw new StreamError(400, `unknown field ${unknown[0]}: only Kind and ID are accepted`);
  if (obj.Kind === undefined || obj.Kind === null || obj.Kind === '')
    throw new StreamError(400, 'Kind is required');
  if (typeof obj.Kind !== 'string' || obj.Kind.length > 64)
    throw new StreamError(400, 'Kind must be a type name');
  if (obj.ID !== undefined && obj.ID !== null && (typeof obj.ID !== 'string' || obj.ID.length > 256))
    throw new StreamError(400, 'ID must be a string of at most 256 characters');
  // The ID is looked up in the store: no text a backend cannot take (src/core/text.ts).
  if (typeof obj.ID === 'string' && unstorable(obj.ID))
    throw new StreamError(400, 'ID may not contain U+0000 or an unpaired UTF-16 surrogate');
  const req: EventStreamRequest = { Kind: obj.Kind };
  if (typeof obj.ID === 'string' && obj.ID !== '') req.ID = obj.ID;
  return req;
}
