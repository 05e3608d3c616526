import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { limitUnusedBody, UNUSED_BODY_BYTES, UNUSED_BODY_MS } from '../core/unusedbody.js';
import { errorPage, type PageDetail } from './pages.js';

/** The X-Error-Code a response was refused with, kept on it for the access log (src/proxy/accesslog.ts). */
export const ERROR_CODE: unique symbol = Symbol('gatehouse.errorCode');
type WithCode = ServerResponse & { [ERROR_CODE]?: string };

export function errorCodeOf(res: ServerResponse): string | undefined {
  return (res as WithCode)[ERROR_CODE];
}

/** An error as a page for browsers (src/proxy/pages.ts), else the service's JSON error shape. */
export function sendError(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  code: string,
  message: string,
  headers: Record<string, string> = {},
  detail?: PageDetail,
) {
  limitUnusedBody(req, res);
  (res as WithCode)[ERROR_CODE] = code;
  const h: Record<string, string> = { 'cache-control': 'no-store', 'x-error-code': code, ...headers };
  if (status === 302) {
    res.writeHead(302, h);
    return void res.end();
  }
  if (String(req.headers.accept ?? '').includes('text/html')) {
    h['content-type'] = 'text/html; charset=utf-8';
    res.writeHead(status, h);
    res.end(errorPage(status, code, message, detail));
    return;
  }
  h['content-type'] = 'application/json';
  res.writeHead(status, h);
  res.end(JSON.stringify({ Status: status, Code: code, Message: message }));
}

/**
 * Ends a raw socket (an upgrade request's) after its last bytes and closes it soon. What the
 * client still sends meanwhile is read and dropped, so that it can read the answer first (a socket
 * closed with unread data sends a reset, which may destroy the answer in flight), but only up to
 * UNUSED_BODY_BYTES and for UNUSED_BODY_MS: then, or when the client ends its side, the socket is
 * destroyed. Without this a socket nobody reads would never see the client's end and stay open.
 */
export function endSoon(socket: Duplex, last?: string) {
  if (socket.destroyed) return;
  if (last === undefined) socket.end();
  else socket.end(last);
  let read = 0;
  const destroyWhenWritten = () => {
    if (socket.writableFinished) socket.destroy();
    else socket.once('finish', () => socket.destroy());
  };
  const timer = setTimeout(() => socket.destroy(), UNUSED_BODY_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  socket.once('end', destroyWhenWritten);
  socket.on('data', (chunk: Buffer) => {
    read += chunk.length;
    if (read <= UNUSED_BODY_BYTES) return;
    socket.pause();
    destroyWhenWritten();
  });
}

/** Writes a whole HTTP/1.1 response on a raw socket (refused upgrades) and closes it (endSoon). */
export function rawResponse(socket: Duplex, status: number, headers: Record<string, string>, body: string) {
  if (socket.destroyed) return;
  const reason =
    {
      400: 'Bad Request',
      401: 'Unauthorized',
      302: 'Found',
      404: 'Not Found',
      502: 'Bad Gateway',
      503: 'Service Unavailable',
      504: 'Gateway Timeout',
    }[status] ?? 'Error';
  let text = `HTTP/1.1 ${status} ${reason}\r\nconnection: close\r\ncontent-length: ${Buffer.byteLength(body)}\r\n`;
  for (const [k, v] of Object.entries(headers)) text += `${k}: ${v}\r\n`;
  endSoon(socket, `${text}\r\n${body}`);
}
