import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import type { TestService } from '../helpers.js';

/** A cookie-keeping browser stand-in over fastify inject; sends the CSRF header unless told not to. */
export class Browser {
  readonly cookies = new Map<string, string>();
  constructor(
    readonly s: TestService,
    readonly opts: { csrf?: boolean; ip?: string } = {},
  ) {}

  get session() {
    return this.cookies.get('gatehouse_session');
  }
  get device() {
    return this.cookies.get('gatehouse_device');
  }

  async req(o: {
    method?: string;
    url: string;
    form?: Record<string, string | string[]>;
    json?: unknown;
    payload?: string;
    headers?: Record<string, string>;
  }): Promise<LightMyRequestResponse> {
    const headers: Record<string, string> = { ...(o.headers ?? {}) };
    if (this.cookies.size > 0 && headers.cookie === undefined)
      headers.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    if (this.opts.csrf !== false && headers['x-requested-with'] === undefined)
      headers['x-requested-with'] = 'test';
    let payload: string | undefined = o.payload;
    if (o.form) {
      const p = new URLSearchParams();
      for (const [k, v] of Object.entries(o.form)) for (const x of Array.isArray(v) ? v : [v]) p.append(k, x);
      payload = p.toString();
      headers['content-type'] = 'application/x-www-form-urlencoded';
    } else if (o.json !== undefined) {
      payload = JSON.stringify(o.json);
      headers['content-type'] = 'application/json';
    }
    const res = await this.s.app.inject({
      method: (o.method ?? (payload !== undefined ? 'POST' : 'GET')) as InjectOptions['method'],
      url: o.url,
      headers,
      payload,
      remoteAddress: this.opts.ip ?? '127.0.0.1',
    });
    const set = res.headers['set-cookie'];
    for (const c of set === undefined ? [] : Array.isArray(set) ? set : [set]) {
      const [pair] = c.split(';');
      const i = (pair ?? '').indexOf('=');
      const name = (pair ?? '').slice(0, i);
      const value = (pair ?? '').slice(i + 1);
      if (value === '' || /Max-Age=0/i.test(c)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return res;
  }

  post(url: string, form: Record<string, string | string[]> = {}) {
    return this.req({ method: 'POST', url, form });
  }
}

/** Creates a user with an e-mail address (and optionally a password/PIN) through the API. */
export async function makeUser(
  s: TestService,
  o: { email: string; password?: string; pin?: string; admin?: boolean; active?: boolean },
): Promise<string> {
  const res = await s.req({
    method: 'POST',
    url: '/users',
    payload: { Email: o.email, Admin: o.admin ?? false, Active: o.active ?? true },
  });
  if (res.statusCode !== 201) throw new Error(`create user: ${res.statusCode} ${res.body}`);
  const id = String(res.headers['x-id']);
  if (o.password) {
    const r = await s.req({
      method: 'PUT',
      url: `/auth/enroll/password?user=${id}`,
      payload: { Password: o.password },
    });
    if (r.statusCode !== 204) throw new Error(`set password: ${r.statusCode} ${r.body}`);
  }
  if (o.pin) {
    const r = await s.req({ method: 'PUT', url: `/auth/enroll/pin?user=${id}`, payload: { PIN: o.pin } });
    if (r.statusCode !== 204) throw new Error(`set PIN: ${r.statusCode} ${r.body}`);
  }
  return id;
}

/** A browser signed in with e-mail + password. */
export async function signedIn(s: TestService, email: string, password: string, opts: { ip?: string } = {}) {
  const b = new Browser(s, opts);
  const e = await b.post('/auth/email', { email });
  if (e.statusCode !== 204) throw new Error(`email: ${e.statusCode} ${e.body}`);
  const p = await b.post('/auth/password', { password });
  if (p.statusCode !== 204) throw new Error(`password: ${p.statusCode} ${p.body}`);
  return b;
}
