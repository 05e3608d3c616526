// The reference for GET /users/:id: a bare Fastify route serving the same body, in a process of
// its own like `gatehouse serve`, measured in the same run (bench/api.mjs).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { pinned } from './pin.mjs';
import { freePort, liveServers } from './server.mjs';

/**
 * Starts `node -e <fastify app>` from `root` (its node_modules/fastify) on a free loopback port,
 * answering GET /users/:id with `body` as application/json and an ETag, nothing else: no
 * authentication, no database; on the CPUs `cpus` (a taskset list) when given. Returns
 * { url, pid, stop() }.
 */
export async function startBareFastify(root, body, cpus) {
  const port = await freePort();
  const code = `
    const fastify = require(${JSON.stringify(join(root, 'node_modules/fastify'))});
    const app = fastify({ logger: false });
    const body = process.env.BARE_BODY;
    app.get('/users/:id', (req, reply) => {
      reply.header('etag', '"bare"').type('application/json').send(body);
    });
    app.listen({ host: '127.0.0.1', port: ${port} }).then(() => process.stdout.write('ready\\n'));
  `;
  const child = spawn(...pinned(cpus, process.execPath, ['-e', code]), {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, BARE_BODY: body },
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  const stop = async () => {
    child.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    child.kill('SIGKILL');
  };
  liveServers.add(stop);
  exited.then(() => liveServers.delete(stop));
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('the bare Fastify server did not start')), 20_000);
    child.stdout.setEncoding('utf8').on('data', (d) => {
      if (d.includes('ready')) {
        clearTimeout(t);
        resolve();
      }
    });
    child.on('exit', () => reject(new Error('the bare Fastify server exited')));
  });
  return { url: `http://127.0.0.1:${port}`, pid: child.pid, stop };
}
