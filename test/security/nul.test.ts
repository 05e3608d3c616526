/**
 * U+0000 and unpaired UTF-16 surrogates at the service's input boundary. PostgreSQL's text and
 * jsonb cannot hold U+0000, and jsonb refuses an unpaired "\ud800" escape; SQLite stores both. On
 * main such a string answered 500 on PostgreSQL and worked on SQLite. The service refuses them in
 * every string a client sends, before any reaches the store (JSON bodies at any depth, keys
 * included; form fields; path ids; query parameters; list filters, orders and cursors): 400 with
 * the usual X-Error-Code and Field, the same answer on both backends. docs/api.md, Conventions.
 *
 * Every property sends each request to a service on every backend of the run and compares the
 * answers, so "identical between backends" is checked request by request.
 *
 * Longer than ~400 lines on purpose: a suite of independent attack cases on one mechanism, each
 * readable on its own; splitting it would scatter the shared set-up, not make a case easier to read.
 */
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import type { InjectOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeUser } from '../auth/client.js';
import { EventClient } from '../events/client.js';
import { backends, jsonLines, startTestService, type TestService } from '../helpers.js';

interface Answer {
  status: number;
  code: string | undefined;
  field: string | undefined;
}

/** How a generated JSON text spells its escapes: hex digits in upper case, every character escaped. */
interface Spelling {
  upper: boolean;
  escapeAll: boolean;
}

const hex4 = (c: number, sp: Spelling) => {
  const h = c.toString(16).padStart(4, '0');
  return sp.upper ? h.toUpperCase() : h;
};

/** A JSON string literal; surrogates (paired or not) and controls always as \u escapes. */
function quote(s: string, sp: Spelling): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += '\\\\';
    else if (c < 0x20 || (c >= 0xd800 && c <= 0xdfff) || sp.escapeAll) out += `\\u${hex4(c, sp)}`;
    else out += s[i];
  }
  return `${out}"`;
}

function toJson(v: unknown, sp: Spelling): string {
  if (typeof v === 'string') return quote(v, sp);
  if (Array.isArray(v)) return `[${v.map((x) => toJson(x, sp)).join(',')}]`;
  if (v !== null && typeof v === 'object')
    return `{${Object.entries(v)
      .map(([k, x]) => `${quote(k, sp)}:${toJson(x, sp)}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

/** How the service names a key in Field: JSON escapes, so no NUL or lone surrogate is echoed. */
const esc = (k: string) => JSON.stringify(k).slice(1, -1);

const spelling: fc.Arbitrary<Spelling> = fc.record({ upper: fc.boolean(), escapeAll: fc.boolean() });
/** Text every backend stores: includes pairs (emoji), controls other than NUL, U+FFFF, a literal "\u0000". */
const clean = fc.string({
  unit: fc.constantFrom(
    'a',
    'Z',
    '0',
    ' ',
    'é',
    '😀',
    '"',
    '\\',
    'u',
    '\u0001',
    '\u001f',
    '\uffff',
    '\\u0000',
  ),
  maxLength: 6,
});
/** NUL, unpaired high and low surrogates, a pair in the wrong order. */
const badChar = fc.constantFrom('\u0000', '\ud800', '\udbff', '\udc00', '\udfff', '\udc00\ud800');
const poisoned = fc.tuple(clean, badChar, clean).map(([a, b, c]) => a + b + c);
const ident = fc.stringMatching(/^[A-Za-z][A-Za-z0-9]{0,5}$/);
/** ASCII text for URLs, percent-encoded; the NUL goes in as %00. */
const urlText = fc.string({ unit: fc.constantFrom('a', 'Z', '0', '-', ' ', '%', '/', 'é'), maxLength: 5 });
const withPctNul = fc
  .tuple(urlText, urlText)
  .map(([a, b]) => ({ raw: `${a}\u0000${b}`, url: `${encodeURIComponent(a)}%00${encodeURIComponent(b)}` }));

describe(`NUL and unpaired surrogates from clients on ${backends().join(', ')}`, () => {
  const services: TestService[] = [];
  let userId = '';
  let groupId = '';
  let n = 0;

  beforeAll(async () => {
    for (const backend of backends()) services.push(await startTestService(backend));
    // The same objects (ids differ) on every backend; ids in URLs come from the first service,
    // which is fine: only the answers' status, code and field are compared.
    for (const s of services) {
      const user = await makeUser(s, { email: 'owner@example.com' });
      const g = await s.req({ method: 'POST', url: '/groups', payload: { Name: 'existing' } });
      expect(g.statusCode, g.body).toBe(201);
      userId ||= user;
      groupId ||= String(g.headers['x-id']);
    }
  });
  afterAll(async () => {
    for (const s of services) await s.close();
  });

  /** Sends the request to every backend: each answer is below 500 and they are all the same. */
  async function send(opts: InjectOptions & { key?: string }): Promise<Answer> {
    const answers: Answer[] = [];
    for (const s of services) {
      const r = await s.req(opts);
      let field: string | undefined;
      try {
        field = (JSON.parse(r.body) as { Field?: string }).Field;
      } catch {}
      answers.push({ status: r.statusCode, code: r.headers['x-error-code'] as string | undefined, field });
    }
    for (const a of answers) expect(a.status, JSON.stringify(answers)).toBeLessThan(500);
    expect(answers).toEqual(answers.map(() => answers[0]));
    return answers[0] as Answer;
  }

  const refused = (field: string, code = 'Invalid Field'): Answer => ({ status: 400, code, field });

  it('the regression cases: a NUL in a body, a filter, a cursor or a path id is a 400 on every backend', async () => {
    const cursor = Buffer.from(JSON.stringify(['Name,ID', true, ['\u0000', 'x']])).toString('base64url');
    expect(await send({ method: 'POST', url: '/groups', payload: { Name: 'nul\u0000name' } })).toEqual(
      refused('Name'),
    );
    expect(
      await send({ method: 'POST', url: '/groups', payload: { Name: 'x', Description: '\u0000' } }),
    ).toEqual(refused('Description'));
    expect(await send({ url: `/groups?filter=${encodeURIComponent('Name = "\\u0000"')}` })).toEqual(
      refused('filter', 'Invalid Filter'),
    );
    expect(await send({ url: `/groups?filter=${encodeURIComponent('ID >= "a\\u0000"')}` })).toEqual(
      refused('filter', 'Invalid Filter'),
    );
    expect(await send({ url: `/groups?order=Name&start=${cursor}` })).toEqual(
      refused('start', 'Invalid Cursor'),
    );
    expect(await send({ url: `/groups/${encodeURIComponent('a\u0000b')}` })).toEqual(refused('id'));
    // PostgreSQL's jsonb refuses an unpaired surrogate escape as it refuses \u0000.
    expect(await send({ method: 'POST', url: '/groups', payload: { Name: 'lone \ud800' } })).toEqual(
      refused('Name'),
    );
  });

  it('a JSON body with NUL or an unpaired surrogate anywhere (any depth, in a key, any escape spelling) is a 400 naming where', async () => {
    const step = fc.oneof(ident, fc.nat(2));
    const target = fc.constantFrom(
      { method: 'POST', url: '/groups' },
      { method: 'POST', url: '/users' },
      { method: 'PUT', url: '/tenant' },
      { method: 'POST', url: '/auth/email' },
      { method: 'PUT', url: '/auth/enroll/password?user=USER' },
      { method: 'POST', url: '/groups/check' },
      { method: 'POST', url: '/groups/GROUP/members/USER' },
    );
    await fc.assert(
      fc.asyncProperty(
        target,
        ident,
        fc.array(step, { maxLength: 4 }),
        fc.boolean(),
        poisoned,
        spelling,
        async (t, first, rest, inKey, bad, sp) => {
          const steps: (string | number)[] = [first, ...rest];
          let leaf: unknown = inKey ? { [bad]: 1 } : bad;
          for (const s of [...steps].reverse()) {
            leaf =
              typeof s === 'number' ? [...Array(s).fill('x'), leaf] : { Before: 'x', [s]: leaf, After: [1] };
          }
          let field = '';
          for (const s of inKey ? [...steps, bad] : steps)
            field += typeof s === 'number' ? `[${s}]` : field === '' ? esc(s) : `.${esc(s)}`;
          const answer = await send({
            method: t.method as 'POST',
            url: t.url.replace('USER', userId).replace('GROUP', groupId),
            headers: { 'content-type': 'application/json', 'if-match': '*' },
            payload: toJson(leaf, sp),
          });
          expect(answer).toEqual(refused(field));
        },
      ),
      { numRuns: 60 },
    );
  });

  it('a list filter, order or cursor holding NUL or an unpaired surrogate is a 400 naming the parameter', async () => {
    const filter = fc
      .record({
        path: fc.constantFrom('Name', 'Description', 'ID', 'CreateTime'),
        op: fc.constantFrom('=', '<', '<=', '>=', '>'),
        pad: fc.constantFrom('', ' ', '\t'),
        bad: poisoned,
        sp: spelling,
        other: fc.boolean(),
      })
      .map(({ path, op, pad, bad, sp, other }) => ({
        url: `/groups?${other ? 'filter=Name%20%3E%20%22%22&' : ''}filter=${encodeURIComponent(`${path}${pad}${op}${pad}${quote(bad, sp)}`)}`,
        expected: refused('filter', 'Invalid Filter'),
      }));
    const orders = [[], ['Name'], ['-Description', 'Name']];
    const cursor = fc
      .record({
        order: fc.constantFrom(...orders),
        slot: fc.nat(2),
        bad: poisoned,
        sp: spelling,
        param: fc.constantFrom('start', 'end'),
        after: fc.boolean(),
      })
      .map(({ order, slot, bad, sp, param, after }) => {
        const sig = [...order, 'ID'].join(',');
        const key: unknown[] = [...order, 'ID'].map(() => 'k');
        key[slot % key.length] = bad;
        const c = Buffer.from(toJson([sig, after, key], sp), 'utf8').toString('base64url');
        const q = order.map((o) => `order=${encodeURIComponent(o)}`);
        return {
          url: `/groups?${[...q, `${param}=${c}`].join('&')}`,
          expected: refused(param, 'Invalid Cursor'),
        };
      });
    // A raw %00 in a parameter is refused before the list query is parsed.
    const raw = fc
      .record({ param: fc.constantFrom('filter', 'order', 'start', 'end', 'limit'), v: withPctNul })
      .map(({ param, v }) => ({ url: `/groups?${param}=${v.url}`, expected: refused(param) }));
    await fc.assert(
      fc.asyncProperty(fc.oneof(filter, cursor, raw), async ({ url, expected }) => {
        expect(await send({ url })).toEqual(expected);
      }),
      { numRuns: 80 },
    );
  });

  it('a NUL in a path id or a query parameter (name or value) is a 400 naming it, before credentials are looked at', async () => {
    const path = fc
      .record({
        route: fc.constantFrom(
          { url: '/groups/{v}', field: 'id', methods: ['GET', 'PUT', 'DELETE', 'POST', 'HEAD'] },
          { url: '/users/{v}', field: 'id', methods: ['GET', 'PUT', 'DELETE', 'HEAD'] },
          { url: '/apikeys/{v}', field: 'id', methods: ['GET', 'DELETE'] },
          { url: '/auth/sessions/{v}', field: 'id', methods: ['DELETE'] },
          { url: '/groups/{group}/members/{v}', field: 'user', methods: ['GET', 'POST', 'DELETE'] },
          { url: '/groups/{v}/members/{user}/history', field: 'id', methods: ['GET', 'HEAD'] },
          // No route: the segment is named as the path.
          { url: '/nowhere/{v}', field: 'path', methods: ['GET', 'POST'] },
        ),
        which: fc.nat(4),
        v: withPctNul,
      })
      .map(({ route, which, v }) => ({
        method: route.methods[which % route.methods.length] as string,
        url: route.url.replace('{group}', groupId).replace('{user}', userId).replace('{v}', v.url),
        expected: refused(route.field),
      }));
    const query = fc
      .record({
        url: fc.constantFrom('/users/me', '/groups', '/auth/sessions', '/tenant', '/nowhere'),
        name: fc.oneof(fc.constantFrom('user', 'access_token', 'x', 'limit'), ident),
        inName: fc.boolean(),
        v: withPctNul,
      })
      .map(({ url, name, inName, v }) => ({
        method: 'GET',
        url: inName ? `${url}?a=1&${v.url}=${name}` : `${url}?a=1&${name}=${v.url}`,
        expected: refused(inName ? esc(v.raw) : name),
      }));
    await fc.assert(
      fc.asyncProperty(fc.oneof(path, query), fc.boolean(), async ({ method, url, expected }, keyless) => {
        const answer = await send({ method: method as 'GET', url, ...(keyless ? { key: '' } : {}) });
        // HEAD answers carry no body, so no Field.
        expect(answer).toEqual(method === 'HEAD' ? { ...expected, field: undefined } : expected);
      }),
      { numRuns: 80 },
    );
  });

  it('a body nested as deep as the size limit allows, with a NUL at the bottom, is a 400 (no stack overflow)', async () => {
    for (const [open, close, step] of [
      ['[', ']', '[0]'],
      ['{"a":', '}', 'a'],
    ] as const) {
      // As deep as the service's 1 MiB body limit allows.
      const depth = Math.floor((1024 * 1024 - 64) / (open.length + close.length));
      const answer = await send({
        method: 'POST',
        url: '/groups',
        headers: { 'content-type': 'application/json' },
        // A literal backslash-u0000 (allowed), then the escape of a NUL (refused).
        payload: `${open.repeat(depth)}"\\\\u0000 \\u0000"${close.repeat(depth)}`,
      });
      expect(answer.status).toBe(400);
      expect(answer.code).toBe('Invalid Field');
      // Field shows the first steps of the path.
      expect(answer.field?.startsWith(step === 'a' ? 'a.a.a' : '[0][0][0]')).toBe(true);
      expect(answer.field?.endsWith('…')).toBe(true);
    }
  });

  it('an unpaired surrogate cannot come in through the URL: its UTF-8 escapes are refused in the path, kept as text in the query', async () => {
    const surrogateEscape = fc.constantFrom(
      '%ED%A0%80',
      '%ed%bf%bf',
      '%ED%B0%80',
      '%ED%A0%80%ED%B0%80',
      '%C0%80',
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(
          '/groups/{v}',
          '/users/{v}',
          '/groups/{group}/members/{v}',
          '/users/me?x={v}',
          '/groups?filter=Name%20%3D%20%22{v}%22',
          '/groups?{v}=1',
        ),
        urlText,
        surrogateEscape,
        async (route, before, bad) => {
          const v = encodeURIComponent(before) + bad;
          const url = route.replace('{group}', groupId).replace('{v}', v);
          const answer = await send({ url });
          if (!url.includes('?')) expect(answer).toEqual({ status: 400, code: 'Bad Request', field: 'path' });
          else expect([200, 400]).toContain(answer.status);
        },
      ),
      { numRuns: 40 },
    );
  });

  it('a NUL in a form field (sign-in, the group check) is a 400 naming the field', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(
          { url: '/auth/email', fields: ['email'] },
          { url: '/groups/check', fields: ['user', 'group', 'op'] },
          { url: '/groups/GROUP/members/USER', fields: ['reason'] },
        ),
        fc.nat(2),
        withPctNul,
        fc.boolean(),
        async (t, which, v, inName) => {
          const name = t.fields[which % t.fields.length] as string;
          const others = t.fields.filter((f) => f !== name).map((f) => `${f}=x`);
          const answer = await send({
            method: 'POST',
            url: t.url.replace('GROUP', groupId).replace('USER', userId),
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            payload: [...others, inName ? `${v.url}=x` : `${name}=${v.url}`].join('&'),
          });
          expect(answer).toEqual(refused(inName ? esc(v.raw) : name));
        },
      ),
      { numRuns: 30 },
    );
  });

  it('an event stream request whose ID holds NUL or an unpaired surrogate is answered 400, and the stream stays open', async () => {
    const ids = ['a\u0000b', '\u0000', 'lone \ud800', '\udc00x', '\udc00\ud800'];
    const answers: unknown[] = [];
    for (const s of services) {
      await s.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = s.app.server.address() as AddressInfo;
      const c = await EventClient.open(`http://127.0.0.1:${port}`, s.adminKey);
      for (const kind of ['User', 'Group']) for (const id of ids) c.send({ Kind: kind, ID: id });
      const answered = () => c.frames.filter((f) => f.StatusCode !== undefined).length;
      await c.until((x) => answered() >= 2 * ids.length || x.closed !== undefined, 5000, 'the answers');
      answers.push({ closed: c.closed, statuses: c.frames.map((f) => [f.Kind, f.ID, f.StatusCode]) });
      c.ws.close();
    }
    expect(answers[0]).toEqual({
      closed: undefined,
      statuses: ['User', 'Group'].flatMap((kind) => ids.map((id) => [kind, id, 400])),
    });
    expect(answers).toEqual(answers.map(() => answers[0]));
  });

  it('text without NUL or unpaired surrogates (pairs, other controls, U+FFFF, a literal "\\u0000") is stored and found alike on every backend', async () => {
    await fc.assert(
      fc.asyncProperty(clean, spelling, async (text, sp) => {
        n++;
        const name = `text ${n}`;
        const created = await send({
          method: 'POST',
          url: '/groups',
          headers: { 'content-type': 'application/json' },
          payload: toJson({ Name: name, Description: text }, sp),
        });
        expect(created.status).toBe(201);
        for (const s of services) {
          const found = await s.req({
            url: `/groups?filter=${encodeURIComponent(`Description = ${quote(text, sp)}`)}&filter=${encodeURIComponent(`Name = ${JSON.stringify(name)}`)}`,
          });
          expect(found.statusCode, found.body).toBe(200);
          expect(jsonLines(found.body).map((l) => (l.Item as { Description: string }).Description)).toEqual([
            text,
          ]);
        }
      }),
      { numRuns: 30 },
    );
  });
});
