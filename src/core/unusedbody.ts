/**
 * The body of a request a server answers without using it (a refusal, an error, a redirect):
 * shared by the access proxy and the service, which both answer before reading any body.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';

/** The most of an unused request body a server reads to keep the connection (a small form, an upload's first packets). */
export const UNUSED_BODY_BYTES = 64 * 1024;
/** How long a server waits for the rest of such a body once it has answered. */
export const UNUSED_BODY_MS = 1000;

/**
 * Does the request declare a body (a non-zero Content-Length, or Transfer-Encoding)? Node's parser
 * has refused a request that declares both.
 */
export function declaresBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return length !== undefined
    ? length !== '0' && Number(length) !== 0
    : req.headers['transfer-encoding'] !== undefined;
}

/**
 * To call before a server writes an answer (a refusal, an error, a redirect) to a request whose
 * body it will not use. The body is the client's to send, and the connection can carry another
 * request only after it; but reading it without limit lets one anonymous client make the server
 * take gigabytes (Content-Length: 1 GiB, or chunked without end) or hold the connection by sending
 * slowly. So a body declared at most UNUSED_BODY_BYTES long, or chunked, is read and dropped, up to
 * UNUSED_BODY_BYTES and for UNUSED_BODY_MS at most: the connection stays open if the body ended by
 * then, else it is closed after the answer. A larger declared body is not read at all: the answer
 * says `Connection: close` and the connection is closed after it.
 */
export function limitUnusedBody(req: IncomingMessage, res: ServerResponse) {
  // Only a connection can be kept or closed: an injected request (Fastify's inject, used by the
  // tests and by nothing that listens) has a stand-in socket without end() or destroySoon().
  if (req.complete || !(req.socket instanceof Socket)) return;
  if (!declaresBody(req)) return;
  const length = req.headers['content-length'];
  // Node ends and destroys the socket of a `Connection: close` answer as soon as it is written
  // (destroySoon); with the client's body still arriving that is a reset, which can destroy the
  // answer before the client has read it. However this connection is closed, it lingers instead.
  const socket = req.socket;
  socket.destroySoon = () => linger(socket);
  if (length !== undefined && Number(length) > UNUSED_BODY_BYTES) {
    if (!res.headersSent) res.shouldKeepAlive = false;
    // Marks the body as being read (it is not: the socket stops once a buffer's worth waits), so
    // that Node does not read it all to discard it once the answer is written.
    req.read(0);
    return closeAfterAnswer(req, res);
  }
  let read = 0;
  const stop = () => {
    clearTimeout(timer);
    req.off('data', onData);
    req.off('end', stop);
  };
  const giveUp = () => {
    stop();
    req.pause();
    closeAfterAnswer(req, res);
  };
  const onData = (chunk: Buffer) => {
    read += chunk.length;
    if (read > UNUSED_BODY_BYTES) giveUp();
  };
  const timer = setTimeout(giveUp, UNUSED_BODY_MS);
  timer.unref();
  req.on('data', onData);
  req.once('end', stop);
  req.resume();
}

/**
 * Closes the connection once the answer has been written, while the client may still be sending
 * the body nobody reads (linger).
 */
function closeAfterAnswer(req: IncomingMessage, res: ServerResponse) {
  const socket = req.socket;
  if (res.writableFinished) linger(socket);
  else res.once('finish', () => linger(socket));
  // An answer that is never written (the client does not read): the connection goes anyway.
  res.once('close', () => {
    if (!res.writableFinished) socket.destroy();
  });
}

// module-state: a per-connection side table (sockets already lingering); gone with the socket.
const lingering = new WeakSet<Duplex>();

/** Ends the socket after what was written and destroys it UNUSED_BODY_MS later, unless the client closed first. */
function linger(socket: Duplex) {
  if (socket.destroyed || lingering.has(socket)) return;
  lingering.add(socket);
  socket.end();
  const timer = setTimeout(() => socket.destroy(), UNUSED_BODY_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
}
