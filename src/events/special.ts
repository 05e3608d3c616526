import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { Principal } from '../auth/principal.js';
import type { ServiceContext } from '../store/service.js';
import type { ListItemFrame } from './protocol.js';

/** What a special kind's source is given for one subscription. */
export interface SpecialKindContext {
  kind: string;
  /** The ID of the EventStreamRequest, if any. */
  id: string | undefined;
  principal: Principal;
  /** The upgrade request (its cookies, headers, session...). */
  request: FastifyRequest;
  logger: FastifyBaseLogger;
  service: ServiceContext;
  /**
   * Calls `fn` for every session change of every instance (awaited, in order, before the hub
   * checks the integrity level of the affected streams); returns the unsubscribe function.
   */
  onSessionChange(fn: (ev: SessionChange) => Promise<void>): () => void;
  /**
   * Calls `fn` with the kind and ID of every object written (from the change log, so writes of
   * every instance); returns the unsubscribe function.
   */
  onObjectChange(fn: (ev: ObjectChange) => void): () => void;
  /** Sends a frame; Kind is filled in. Returns false once the connection is closing. */
  send(frame: ListItemFrame): boolean;
  /** Sends the catch-up marker (ID ""). Call it once, after the current state. */
  caughtUp(): void;
}

/**
 * A source of frames for a kind that is not an object type (Auth, OtherSession). `subscribe`
 * sends the current state, then `ctx.caughtUp()`, then later changes, until the returned
 * function is called (the connection closed). Throw StreamError to refuse with an error frame.
 */
export interface SpecialKind {
  subscribe(ctx: SpecialKindContext): (() => void) | Promise<() => void>;
}

/** A write to a session (src/auth/session/sessions.ts sessionEvents); sessionId '' = all of the user's. */
export interface SessionChange {
  userId: string;
  sessionId: string;
  deleted: boolean;
}

/** An object written (the change log's type and ID); deleted when it is gone. */
export interface ObjectChange {
  type: string;
  id: string;
  deleted: boolean;
}
