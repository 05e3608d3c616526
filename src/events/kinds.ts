import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { Principal } from '../auth/principal.js';
import { type ListItemFrame, StreamError } from './protocol.js';

/** What a special kind's source is given for one subscription. */
export interface SpecialKindContext {
  kind: string;
  /** The ID of the EventStreamRequest, if any. */
  id: string | undefined;
  principal: Principal;
  /** The upgrade request (its cookies, headers, session...). */
  request: FastifyRequest;
  logger: FastifyBaseLogger;
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

/** A source for a kind that cannot be served yet: answers every subscription with an error frame. */
export function unavailableKind(status: number, text: string): SpecialKind {
  return {
    subscribe() {
      throw new StreamError(status, text);
    },
  };
}

const NO_SESSIONS = (kind: string) =>
  unavailableKind(
    501,
    `${kind} events are not implemented yet: session state is not streamed by this server`,
  );

/**
 * The special kinds, by name. The sign-in code provides a real source with
 * `registerSpecialKind('Auth', source)` (one line beside its routes); until then they answer 501.
 */
const specialKinds = new Map<string, SpecialKind>([
  ['Auth', NO_SESSIONS('Auth')],
  ['OtherSession', NO_SESSIONS('OtherSession')],
]);

export function registerSpecialKind(kind: string, source: SpecialKind): void {
  specialKinds.set(kind, source);
}

export function specialKind(kind: string): SpecialKind | undefined {
  return specialKinds.get(kind);
}
