import type { IncomingMessage } from 'node:http';
import fastifyWebsocket from '@fastify/websocket';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { checkCsrf } from '../auth/session/authenticator.js';
import { setSessionCookie } from '../auth/session/cookies.js';
import { pendingCookies } from '../auth/session/sessions.js';
import { ApiError } from '../core/errors.js';
import { err, type RouteSchema } from '../core/routeschema.js';
import { EventHub, MAX_MESSAGE_BYTES } from '../events/hub.js';
import type { ServiceContext } from '../store/service.js';
import { principalOf } from './objects.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The event stream hub: integrityChanged() and endStreams() for the sign-in code. */
    events: EventHub;
  }
}

/**
 * GET /events (docs/events.md). The upgrade request goes through the normal Fastify pipeline
 * (@fastify/websocket), so it is authenticated by the same onRequest hook as every route and is
 * refused with our JSON error shape (401 without credentials) before any upgrade.
 */
export async function registerEventRoutes(app: FastifyInstance, ctx: ServiceContext) {
  const hub = new EventHub(ctx);
  app.decorate('events', hub);
  // Before the plugin's own preClose (which closes sockets without a code): 1001 to every client.
  app.addHook('preClose', async () => hub.shutdown());
  app.addHook('onClose', async () => hub.close());
  // An upgrade refused before the handshake (401, 404...) leaves a socket that no longer speaks
  // HTTP: end it once the response is out, or a client could hold it open forever.
  app.answers.afterResponse((req, reply) => {
    if (reply.statusCode !== 101 && isUpgrade(req.headers)) endSocket(req.raw.socket);
  });
  // The websocket plugin lives in a scope of its own that holds only /events: at the root it adds
  // two hooks to every request and wraps every handler. An upgrade asked of any other path is
  // answered as plain HTTP, and the hook above then ends its socket.
  await app.register(async (scope) => {
    await scope.register(fastifyWebsocket, {
      options: { maxPayload: MAX_MESSAGE_BYTES, perMessageDeflate: false },
      errorHandler: (err, socket, req) => {
        req.log.warn({ err }, 'event stream socket error');
        socket.terminate();
      },
    });
    // The 101 response is written by ws, not by Fastify: carry over the cookies the request set
    // (a session token rotated while authenticating must reach the browser, or it is signed out).
    const replies = new WeakMap<IncomingMessage, FastifyReply>();
    scope.websocketServer.on('headers', (headers: string[], raw: IncomingMessage) => {
      const set = replies.get(raw)?.getHeader('set-cookie');
      for (const c of set === undefined ? [] : Array.isArray(set) ? set : [set])
        headers.push(`Set-Cookie: ${c}`);
    });
    scope.route({
      method: 'GET',
      url: '/events',
      schema: EVENTS,
      // A session still signing in may follow its own AuthResponse (kind Auth) and nothing else.
      config: { followSignIn: true },
      preHandler: async (req, reply) => {
        // Cookies ride along on cross-site websocket handshakes (no CORS for websockets): a
        // session-authenticated stream must come from our own origin (cross-site websocket hijacking).
        if (req.principal?.via === 'session') checkCsrf(req);
        if (isUpgrade(req.headers) && !hub.mayOpen(principalOf(req)))
          throw new ApiError(
            'TooManyRequests',
            `at most ${hub.options.maxStreamsPerUser} event streams may be open for one user: close one first`,
          );
        const token = pendingCookies.get(req);
        if (token) {
          pendingCookies.delete(req);
          setSessionCookie(req, reply, token);
        }
        replies.set(req.raw, reply);
      },
      handler: async () => {
        throw new ApiError('UpgradeRequired', 'GET /events is a websocket: open it with a websocket client', {
          headers: { Upgrade: 'websocket' },
        });
      },
      wsHandler: async (socket, req) => {
        await hub.accept(socket, principalOf(req), req);
      },
    });
  });
}

function endSocket(socket: IncomingMessage['socket'] | undefined) {
  if (!socket || socket.destroyed || typeof socket.end !== 'function') return;
  socket.end();
  setTimeout(() => socket.destroy(), 1000).unref();
}

const isUpgrade = (h: Record<string, string | string[] | undefined>) =>
  typeof h.upgrade === 'string' && /(^|,)\s*upgrade\s*(,|$)/i.test(String(h.connection ?? ''));

const EVENTS: RouteSchema = {
  tags: ['Event'],
  summary: 'The event stream: a websocket of the object changes the caller may read (docs/events.md)',
  response: {
    101: { description: 'Switching to the websocket' },
    426: err('Not a websocket handshake'),
    429: err('Too many streams open for this user'),
  },
};
