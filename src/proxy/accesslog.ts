/**
 * The access log: one line per request when its response ends (or its client goes), refused
 * requests included, with the service's field names (method, url, status, ms) so one query reads
 * both programs' logs. The URL goes through the project's redaction (keys, tokens, access-check
 * tokens); no header value is logged.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { hostname } from 'node:os';
import type { Duplex } from 'node:stream';
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
  /** For upgrades (no ServerResponse): the proxy's own answer; unset when the upstream answered. */
  status?: number;
  error?: string;
}

/** Request IDs: this process's ID and a counter (cheap, unique per process and run). */
let counter = 0;
const PREFIX = `${process.pid.toString(36)}-`;

/** Where access-log lines go: a pino logger (tests, embedding), or raw JSON lines (the command). */
export type AccessSink = Logger | { line(text: string): void };

/**
 * The access log of the command: the same JSON lines pino would write (level, time, pid, hostname,
 * the fields, msg), made by hand and written in batches (at most a second late). pino's generic
 * serializer, its redaction pass and a write call per line cost about a third of the proxy's CPU
 * per request under load; the line holds no header and its URL is redacted above. `flush` writes
 * what is pending (at exit). Logged at info: a level above info turns it off.
 */
export function accessLogger(level: string): { sink: AccessSink | undefined; flush: () => void } {
  const dest = pino.destination({ dest: 1, sync: false, minLength: 8 * 1024 });
  const timer = setInterval(() => dest.flush(), 1_000);
  timer.unref();
  const on = pino.levels.values[level] === undefined || (pino.levels.values[level] as number) <= 30;
  const head = `{"level":30,"time":`;
  const tail = `,"pid":${process.pid},"hostname":${JSON.stringify(hostname())},`;
  return {
    sink: on
      ? { line: (fields: string) => dest.write(`${head}${Date.now()}${tail}${fields},"msg":"request"}\n`) }
      : undefined,
    flush: () => {
      clearInterval(timer);
      dest.flushSync();
    },
  };
}

/** A JSON value of a field: strings quoted and escaped, null as null. */
const json = (v: string | number | null | undefined) =>
  v === null || v === undefined ? 'null' : typeof v === 'number' ? String(v) : JSON.stringify(v);

/** A request's record before anything is known of it but its id and start. */
const newRecord = (): AccessRecord => ({
  reqId: PREFIX + (++counter).toString(36),
  start: performance.now(),
  user: null,
  authType: null,
  mode: null,
  upstream: null,
});

export class AccessLog {
  /** `sink` null: the log is off (a level above info), and nothing is recorded. */
  constructor(private readonly sink: AccessSink | null) {}

  /** Starts the record of a request; the line is written when the response closes. */
  start(req: IncomingMessage, res: ServerResponse): AccessRecord {
    const rec = newRecord();
    const sink = this.sink;
    if (sink) res.once('close', () => this.write(sink, req, res, rec));
    return rec;
  }

  /**
   * The record of an upgrade request (a websocket handshake): logged when its connection closes,
   * with the proxy's refusal as its status, or none when the upstream answered (a tunnel's status
   * is the upstream's 101; the line comes when the tunnel ends, `ms` its whole life).
   */
  startUpgrade(req: IncomingMessage, socket: Duplex): AccessRecord {
    const rec = newRecord();
    const sink = this.sink;
    if (sink) socket.once('close', () => this.write(sink, req, undefined, rec));
    return rec;
  }

  private write(sink: AccessSink, req: IncomingMessage, res: ServerResponse | undefined, rec: AccessRecord) {
    const code = res ? errorCodeOf(res) : rec.error;
    const host = rec.host ?? req.headers.host ?? null;
    const url = redact(rec.url ?? req.url);
    // A response cut off before its head went out never had a status: the client went away.
    const status = res ? (res.headersSent ? res.statusCode : null) : (rec.status ?? null);
    const ms = Math.round((performance.now() - rec.start) * 10) / 10;
    if ('line' in sink) {
      sink.line(
        `"reqId":"${rec.reqId}","method":${json(req.method)},"host":${json(host)},"url":${json(url)},"status":${json(status)},"user":${json(rec.user)},"authType":${json(rec.authType)},"mode":${json(rec.mode)},"upstream":${json(rec.upstream)}${code !== undefined ? `,"error":${json(code)}` : ''},"ms":${ms}`,
      );
      return;
    }
    sink.info(
      {
        reqId: rec.reqId,
        method: req.method,
        host,
        url,
        status,
        user: rec.user,
        authType: rec.authType,
        mode: rec.mode,
        upstream: rec.upstream,
        ...(code !== undefined ? { error: code } : {}),
        ms,
      },
      'request',
    );
  }
}
