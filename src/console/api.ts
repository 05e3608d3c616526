/**
 * The console's one way to the service: the public API with the browser session, sending the
 * header the sign-in pages send (`X-Requested-With: gatehouse`, the CSRF rule of docs/signin.md).
 * A 401 Insufficient Integrity hands its error body to the step-up prompt (stepup.tsx) and, once
 * the administrator has proven more, the same request is sent again: the action completes in place.
 */

export interface Reply<T = unknown> {
  status: number;
  data: T;
  headers: Headers;
  text: string;
}

/** The API's error body (docs/api.md, Errors), with the intent of a 401 (docs/signin.md). */
export interface ErrorBody {
  Status?: number;
  Code?: string;
  Message?: string;
  Field?: string;
  Intent?: string;
  IntegrityLevel?: number;
  RequiredLevel?: number;
}

export interface ListItem<T = Doc> {
  ID: string;
  Item: T;
}

// biome-ignore lint/suspicious/noExplicitAny: documents are JSON of any shape, checked where read
export type Doc = Record<string, any>;

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly body: ErrorBody,
  ) {
    super(body.Message || `request failed (${status})`);
  }
}

type StepUp = (refusal: ErrorBody) => Promise<boolean>;
// module-state: one console per page; the step-up prompt registers itself once at start.
let stepUp: StepUp | undefined;
export const onStepUp = (handler: StepUp) => {
  stepUp = handler;
};

export interface CallOptions {
  json?: unknown;
  form?: Record<string, string>;
  ifMatch?: string;
  /** Statuses the caller handles itself (no exception for them). */
  accept?: number[];
}

async function send(method: string, path: string, o: CallOptions): Promise<Reply> {
  const headers: Record<string, string> = { 'X-Requested-With': 'gatehouse', Accept: 'application/json' };
  let body: string | undefined;
  if (o.form) {
    body = new URLSearchParams(o.form).toString();
    headers['Content-Type'] = 'application/x-www-form-urlencoded';
  } else if (o.json !== undefined) {
    body = JSON.stringify(o.json);
    headers['Content-Type'] = 'application/json';
  }
  if (o.ifMatch) headers['If-Match'] = o.ifMatch;
  const res = await fetch(path, { method, headers, body, credentials: 'same-origin', cache: 'no-store' });
  const text = await res.text();
  let data: unknown = null;
  if (
    text &&
    /json/.test(res.headers.get('content-type') ?? '') &&
    !/json-lines/.test(res.headers.get('content-type') ?? '')
  ) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  return { status: res.status, data, headers: res.headers, text };
}

/** Where a signed-out browser goes: the sign-in page, and back to what it was looking at. */
export const signInAgain = () => {
  location.assign(`/signin?return=${encodeURIComponent(location.pathname)}`);
};

/**
 * Sends a request; throws ApiFailure for a status of 400 or more that the caller did not accept.
 * An integrity refusal asks for the step-up (at most twice) and then retries.
 */
export async function call<T = Doc>(method: string, path: string, o: CallOptions = {}): Promise<Reply<T>> {
  for (let attempt = 0; ; attempt++) {
    const r = await send(method, path, o);
    const err = (r.data ?? {}) as ErrorBody;
    if (r.status === 401 && err.Code === 'Insufficient Integrity' && stepUp && attempt < 2) {
      if (await stepUp(err)) continue;
    }
    if (r.status === 401 && err.Code === 'Unauthenticated') signInAgain();
    if (r.status >= 400 && !o.accept?.includes(r.status)) throw new ApiFailure(r.status, err);
    return r as Reply<T>;
  }
}

/** A list endpoint's JSON lines (application/x-json-lines), parsed. */
export async function lines<T = Doc>(path: string): Promise<ListItem<T>[]> {
  const r = await call('GET', path);
  return r.text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as ListItem<T>);
}

/** What to tell the administrator about a failure, in words. */
export function explain(e: unknown): string {
  if (e instanceof ApiFailure) {
    const field = e.body.Field ? ` (${e.body.Field})` : '';
    return `${e.body.Code ?? `Error ${e.status}`}: ${e.message}${field}`;
  }
  return e instanceof Error ? e.message : String(e);
}

/** A path segment, encoded (IDs are plain, but names typed by people are not). */
export const seg = (s: string) => encodeURIComponent(s);

/** A list filter parameter: `Field = "value"` (docs/api.md, List). */
export const filterEq = (field: string, value: string) =>
  `filter=${encodeURIComponent(`${field} = ${JSON.stringify(value)}`)}`;
