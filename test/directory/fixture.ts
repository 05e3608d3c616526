import type { TestService } from '../helpers.js';
import { jsonLines } from '../helpers.js';

let n = 0;
/** A user (with user name and e-mail), a group, and an App giving that group accounts, with an agent token. */
export async function world(s: TestService, accounts: Record<string, unknown> = {}) {
  n++;
  const tag = `${Date.now().toString(36)}${n}`;
  const user = await s.req({
    method: 'POST',
    url: '/users',
    payload: { Email: `u${tag}@example.com`, UserName: `u${tag}`, Name: { FullName: `User ${tag}` } },
  });
  const userId = user.headers['x-id'] as string;
  const group = await s.req({ method: 'POST', url: '/groups', payload: { Name: `g${tag}` } });
  const groupId = group.headers['x-id'] as string;
  const app = await s.req({
    method: 'POST',
    url: '/apps',
    payload: { Name: `a${tag}`, Accounts: { Groups: [groupId], InitialPassword: true, ...accounts } },
  });
  const appId = app.headers['x-id'] as string;
  const token = (await s.req({ method: 'POST', url: `/apps/${appId}/proxytoken` })).json().Token as string;
  return { userId, groupId, appId, token, tag };
}

export async function addMember(s: TestService, groupId: string, userId: string) {
  const r = await s.req({ method: 'POST', url: `/groups/${groupId}/members/${userId}` });
  if (r.statusCode >= 300) throw new Error(`add member: ${r.statusCode} ${r.body}`);
}

export async function claim(s: TestService, token: string, body: Record<string, unknown> = {}) {
  const r = await s.req({
    method: 'POST',
    url: '/accountchanges/claim',
    key: '',
    headers: { authorization: `Bearer ${token}` },
    payload: body,
  });
  if (r.statusCode !== 200) throw new Error(`claim: ${r.statusCode} ${r.body}`);
  return r.json() as {
    RemoteAgentID: string;
    Changes: { Change: Record<string, unknown>; Lease: string; InitialPassword?: string }[];
  };
}

export const report = (s: TestService, token: string, id: string, body: Record<string, unknown>) =>
  s.req({
    method: 'POST',
    url: `/accountchanges/${id}/result`,
    key: '',
    headers: { authorization: `Bearer ${token}` },
    payload: body,
  });

export async function setTenant(s: TestService, change: Record<string, unknown>) {
  const get = await s.req({ method: 'GET', url: '/tenant' });
  const r = await s.req({
    method: 'PUT',
    url: '/tenant',
    payload: { ...(get.json() as object), ...change },
    headers: { 'if-match': get.headers.etag as string },
  });
  if (r.statusCode !== 204 && r.statusCode !== 304) throw new Error(`tenant: ${r.statusCode} ${r.body}`);
}

export const lines = (body: string) => jsonLines(body);
