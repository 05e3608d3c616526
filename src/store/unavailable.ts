import { ApiError } from '../core/errors.js';

/**
 * Whether an error means the database cannot be reached or cannot work right now (as opposed to a
 * bug or a refused statement): the request that met it is answered 503 with Retry-After, and the
 * client may retry it (every write of the store is conditional, so a retry cannot apply twice).
 */
export function databaseUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    // PostgreSQL SQLSTATE: connection exceptions (class 08), the server shutting down or not yet
    // accepting connections (57P01-57P03), too many connections (53300), out of disk or memory (53).
    if (/^08/.test(code) || /^57P0[1-3]$/.test(code) || /^53/.test(code)) return true;
    // A database that refuses new connections (ALLOW_CONNECTIONS false) says 55000 at connect.
    if (code === '55000' && /not currently accepting connections/.test(err.message)) return true;
    // The network: the server is down, restarting or unreachable.
    if (['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH'].includes(code))
      return true;
    // SQLite: locked beyond busy_timeout, disk full, I/O errors, the file gone.
    if (/^SQLITE_(BUSY|LOCKED|FULL|IOERR|CANTOPEN|READONLY)/.test(code)) return true;
  }
  // node-postgres says these without a code (the last: a statement unanswered for query_timeout).
  return /Connection terminated|timeout exceeded when trying to connect|is not queryable|Client was closed|^Query read timeout$/.test(
    err.message,
  );
}

/** How soon a client may retry after the database failed its request (Retry-After, seconds). */
export const DATABASE_RETRY_AFTER_S = 2;

/** The answer to a request the database could not serve: 503, retry shortly. */
export const databaseDown = () =>
  new ApiError('Unavailable', 'the database is unavailable; retry shortly', {
    headers: { 'Retry-After': String(DATABASE_RETRY_AFTER_S) },
  });
