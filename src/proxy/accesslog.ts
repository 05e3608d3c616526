/**
 * The access log: one line per request when its response ends (or its client goes), refused
 * requests included, with the service's field names (method, url, status, ms) so one query reads
 * both programs' logs. The URL goes through the project's redaction (keys, tokens, access-check
 * tokens); no header value is logged.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import pino, { type Logger } from 'pino';
import type { AuthMode } from '../config/proxy.js';
import { errorCodeOf } from './errors.js';
import { redact } from './http.js';

/** What the handling of one request learned about it, filled in as it goes. */
export interface AccessRecord {
  reqId: string;
  start: number;
  /** The user's ID once known; null: none (anonymous, refused, or an open path). */
  user: string | null;
  authType: 'bearer' | 'session' | null;
  mode: AuthMode | null;
  upstream: string | null;
  /** For forward auth: the original request's host and target instead of the subrequest's. */
  host?: string;
  url?: string;
}

/** Request IDs: this process's ID and a counter (cheap, unique per process and run). */
let counter = 0;
const PREFIX = `${process.pid.toString(36)}-`;

/**
 * The access log's own logger for the command: JSON lines on stdout like the process logger, but
 * written in batches (at most a second late) rather than one write call per line, which cost a
 * quarter of the proxy's CPU under load, and without the redaction pass (the line holds no header
 * and its URL is redacted above). `flush` writes what is pending (at exit).
 */
export function accessLogger(level: string): { logger: Logger; flush: () => void } {
  const dest = pino.destination({ dest: 1, sync: false, minLength: 8 * 1024 });
  const timer = setInterval(() => dest.flush(), 1_000);
  timer.unref();
  return {
    logger: pino({ level }, dest),
    flush: () => {
      clearInterval(timer);
      dest.flushSync();
    },
  };
}

export class AccessLog {
  constructor(private readonly log: Logger) {}

  /** Starts the record of a request; the line is written when the response closes. */
  start(req: IncomingMessage, res: ServerResponse): AccessRecord {
    const rec: AccessRecord = {
      reqId: PREFIX + (++counter).toString(36),
      start: performance.now(),
      user: null,
      authType: null,
      mode: null,
      upstream: null,
    };
    res.once('close', () => this.write(req, res, rec));
    return rec;
  }

  private write(req: IncomingMessage, res: ServerResponse, rec: AccessRecord) {
    const code = errorCodeOf(res);
    this.log.info(
      {
        reqId: rec.reqId,
        method: req.method,
        host: rec.host ?? req.headers.host ?? null,
        url: redact(rec.url ?? req.url),
        // A response cut off before its head went out never had a status: the client went away.
        status: res.headersSent ? res.statusCode : null,
        user: rec.user,
        authType: rec.authType,
        mode: rec.mode,
        upstream: rec.upstream,
        ...(code !== undefined ? { error: code } : {}),
        ms: Math.round((performance.now() - rec.start) * 10) / 10,
      },
      'request',
    );
  }
}
