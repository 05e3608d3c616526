// The least any Node.js forwarder can cost (bench/proxy.mjs, targets net-floor and net-work):
// node:net sockets on both sides, one upstream connection per client connection, no HTTP library.
// It authenticates nobody and reads no request body (GET only, Content-Length responses, as the
// bench's upstream sends), so it is not a proxy anyone could run.
// - net-floor relays the bytes as they are, finding only where a request head and a response end:
//   the floor a proxy with its own request parser and response writer (instead of node:http)
//   could approach.
// - net-work (third argument "work") also does, in plain JavaScript, the per-request work every
//   proxy request needs beyond authentication: split both heads into header lines, drop hop-by-hop
//   and identity headers, add six identity headers, write both heads anew, and one JSON access-log
//   line per request (buffered, to /dev/null as the bench's proxy log goes): what such a front end
//   would still cost.
// Usage: node bench/lib/netfloor.mjs <listen port> <upstream port> [work]
import net from 'node:net';
import SonicBoom from 'sonic-boom';

const [listenPort, upstreamPort] = process.argv.slice(2, 4).map(Number);
const work = process.argv[4] === 'work';
const HEAD_END = Buffer.from('\r\n\r\n');
const log = work ? new SonicBoom({ dest: '/dev/null', sync: false, minLength: 8 * 1024 }) : undefined;
const DROP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade']);
const IDENTITY =
  'x-service-user-name: bench\r\nx-service-email: bench@example.test\r\nx-service-full-name: Bench\r\n' +
  'x-service-user: 1\r\nx-service-auth-type: bearer\r\nx-remote-user: bench\r\n';
let counter = 0;

/** Header lines of a head (after its first line), as [lower-case name, value] pairs. */
function headerLines(head) {
  const out = [];
  let at = head.indexOf('\r\n') + 2;
  while (at < head.length) {
    let end = head.indexOf('\r\n', at);
    if (end === -1) end = head.length;
    const colon = head.indexOf(':', at);
    if (colon === -1 || colon > end) throw new Error('net-work: a header line without a colon');
    out.push([head.slice(at, colon).toLowerCase(), head.slice(colon + 1, end).trim()]);
    at = end + 2;
  }
  return out;
}

/** The request head the upstream gets: its own headers but hop-by-hop and identity ones, then the identity. */
function upstreamHead(head) {
  const first = head.slice(0, head.indexOf('\r\n'));
  let out = `${first}\r\n`;
  for (const [name, value] of headerLines(head)) {
    if (DROP.has(name) || name.startsWith('x-service-') || name === 'authorization') continue;
    out += `${name}: ${value}\r\n`;
  }
  return `${out}${IDENTITY}\r\n`;
}

/** Bytes a response takes in all, from its head. */
function responseLength(head, headEnd) {
  const m = /\r\ncontent-length:[ \t]*(\d+)/i.exec(head);
  if (!m) throw new Error('net-floor: the upstream answered without Content-Length');
  return headEnd + 4 + Number(m[1]);
}

net
  .createServer({ noDelay: true }, (client) => {
    const upstream = net.connect({ port: upstreamPort, host: '127.0.0.1', noDelay: true });
    let requests = Buffer.alloc(0);
    let response = Buffer.alloc(0);
    let expected = -1; // bytes of the response being relayed, once its head is in
    let relayed = 0;
    const pending = []; // work: what the access log needs of each request sent upstream
    client.on('data', (chunk) => {
      requests = requests.length ? Buffer.concat([requests, chunk]) : chunk;
      let at = requests.indexOf(HEAD_END);
      let sent = 0;
      let out = '';
      while (at !== -1) {
        if (work) {
          const head = requests.toString('latin1', sent, at);
          const [method, url] = head.slice(0, head.indexOf('\r\n')).split(' ');
          pending.push({ method, url, start: performance.now(), id: `bench-${(++counter).toString(36)}` });
          out += upstreamHead(head);
        }
        sent = at + 4;
        at = requests.indexOf(HEAD_END, sent);
      }
      if (!sent) return;
      if (work) upstream.write(out, 'latin1');
      else upstream.write(sent === requests.length ? requests : requests.subarray(0, sent));
      requests = requests.subarray(sent);
    });
    upstream.on('data', (chunk) => {
      if (!work) client.write(chunk);
      response = response.length ? Buffer.concat([response, chunk]) : chunk;
      let out = '';
      for (;;) {
        let bodyAt = 0;
        if (expected < 0) {
          const end = response.indexOf(HEAD_END);
          if (end === -1) break;
          const head = response.toString('latin1', 0, end);
          expected = responseLength(head, end);
          relayed = 0;
          bodyAt = end + 4;
          if (work) {
            const status = head.slice(9, 12);
            let rebuilt = `HTTP/1.1 ${status} OK\r\n`;
            for (const [name, value] of headerLines(head))
              if (!DROP.has(name)) rebuilt += `${name}: ${value}\r\n`;
            out += `${rebuilt}connection: keep-alive\r\n\r\n`;
            const r = pending.shift();
            const ms = Math.round((performance.now() - r.start) * 10) / 10;
            log.write(
              `{"level":30,"time":${Date.now()},"reqId":"${r.id}","method":${JSON.stringify(r.method)},"url":${JSON.stringify(r.url)},"status":${status},"user":"1","ms":${ms},"msg":"request"}\n`,
            );
          }
        }
        const take = Math.min(expected - relayed, response.length);
        if (work && take > bodyAt) out += response.toString('latin1', bodyAt, take);
        relayed += take;
        response = response.subarray(take);
        if (relayed < expected) break;
        expected = -1;
        if (!response.length) break;
      }
      if (out) client.write(out, 'latin1');
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  })
  .listen(listenPort, '127.0.0.1', () => process.stdout.write('ready\n'));
