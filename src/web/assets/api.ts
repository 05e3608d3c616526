/**
 * The pages' one way to the service: the public API with the session cookie. The header
 * `X-Requested-With: gatehouse` satisfies the session's CSRF rule (docs/signin.md).
 */

/** The API's error body (docs/api.md, Errors), with the intent of a 401 (docs/signin.md). */
export interface ErrorBody {
  Code?: string;
  Message?: string;
  Field?: string;
  Intent?: string;
}

export interface ApiResult<T> {
  status: number;
  /** The body parsed as JSON (not checked: the API's documented shape), or null. */
  data: T | null;
  headers: Headers;
  text: string;
}

export interface ApiOptions {
  /** Sent as application/x-www-form-urlencoded; empty values are left out. */
  form?: Record<string, string>;
  json?: unknown;
}

export function api<T = ErrorBody>(
  method: string,
  path: string,
  opts: ApiOptions = {},
): Promise<ApiResult<T>> {
  const headers: Record<string, string> = { 'X-Requested-With': 'gatehouse', Accept: 'application/json' };
  let bodyText: string | undefined;
  if (opts.form) {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(opts.form)) if (v !== '') p.append(k, v);
    bodyText = p.toString();
    headers['Content-Type'] = 'application/x-www-form-urlencoded';
  } else if (opts.json !== undefined) {
    bodyText = JSON.stringify(opts.json);
    headers['Content-Type'] = 'application/json';
  }
  return fetch(path, { method, headers, body: bodyText, credentials: 'same-origin' }).then((res) =>
    res.text().then((text) => {
      let data: T | null = null;
      try {
        data = text ? (JSON.parse(text) as T) : null;
      } catch {
        data = null;
      }
      return { status: res.status, data, headers: res.headers, text };
    }),
  );
}

/** A 429's advice: when the next attempt may come (X-Next-Attempt), or null for other answers. */
export function tooMany(r: ApiResult<unknown>): string | null {
  if (r.status !== 429) return null;
  const when = r.headers.get('X-Next-Attempt');
  return `Too many attempts. Try again after ${when ? new Date(when).toLocaleTimeString() : 'a while'}.`;
}

/** The API's message, or the status when it gave none. */
export const messageOf = (r: ApiResult<unknown>) => errorOf(r)?.Message || `Request failed (${r.status}).`;

/** The body as the API's error body: what a refusal carries. */
export const errorOf = (r: ApiResult<unknown>) => r.data as ErrorBody | null;

/** A refused step, in the person's words. */
export function explain(r: ApiResult<unknown>): string {
  const wait = tooMany(r);
  if (wait) return wait;
  const e = errorOf(r);
  if (r.status === 403 && e && e.Code === 'Incorrect Credential')
    return 'That is not correct. Please try again.';
  if (e && e.Code === 'Account Missing') return 'There is no account with this e-mail address.';
  return messageOf(r);
}
