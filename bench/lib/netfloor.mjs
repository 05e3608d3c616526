// The least any Node.js forwarder can cost (bench/proxy.mjs, target net-floor): node:net sockets
// on both sides, one upstream connection per client connection, and of HTTP only what finds where
// a request head and a response end. It rewrites no header, authenticates nobody and reads no
// request body, so it is not a proxy anyone could run: it is the floor that a proxy with its own
// request parser and response writer (instead of node:http) could approach, measured on the same
// machine in the same run as nginx.
// Usage: node bench/lib/netfloor.mjs <listen port> <upstream port>
import net from 'node:net';

const [listenPort, upstreamPort] = process.argv.slice(2).map(Number);
const HEAD_END = Buffer.from('\r\n\r\n');

/** Bytes a response takes in all, from its head (Content-Length responses only, as the bench's upstream sends). */
function responseLength(buf, headEnd) {
  const head = buf.toString('latin1', 0, headEnd);
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
    client.on('data', (chunk) => {
      requests = requests.length ? Buffer.concat([requests, chunk]) : chunk;
      let at = requests.indexOf(HEAD_END);
      let sent = 0;
      while (at !== -1) {
        sent = at + 4;
        at = requests.indexOf(HEAD_END, sent);
      }
      if (sent) {
        upstream.write(sent === requests.length ? requests : requests.subarray(0, sent));
        requests = requests.subarray(sent);
      }
    });
    upstream.on('data', (chunk) => {
      client.write(chunk);
      response = response.length ? Buffer.concat([response, chunk]) : chunk;
      for (;;) {
        if (expected < 0) {
          const end = response.indexOf(HEAD_END);
          if (end === -1) return;
          expected = responseLength(response, end);
          relayed = 0;
        }
        const take = Math.min(expected - relayed, response.length);
        relayed += take;
        response = response.subarray(take);
        if (relayed < expected) return;
        expected = -1;
        if (!response.length) return;
      }
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  })
  .listen(listenPort, '127.0.0.1', () => process.stdout.write('ready\n'));
