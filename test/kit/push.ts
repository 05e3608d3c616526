import { createDecipheriv, createECDH, hkdfSync, randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { freePort } from '../net.js';

/** One message the push service received. */
export interface Pushed {
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * A Web Push service on 127.0.0.1: accepts POST /push/<id> (201), keeps the encrypted bodies;
 * `status` sets its answer (410 for an expired subscription).
 */
export class PushService {
  readonly received: Pushed[] = [];
  status = 201;
  private waiters: (() => void)[] = [];
  private constructor(
    readonly server: Server,
    readonly origin: string,
  ) {}

  static async start(): Promise<PushService> {
    const port = await freePort();
    let svc: PushService | undefined;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        svc?.received.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) });
        for (const w of svc?.waiters.splice(0) ?? []) w();
        res.writeHead(svc?.status ?? 500);
        res.end();
      });
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    svc = new PushService(server, `http://127.0.0.1:${port}`);
    return svc;
  }

  async next(path: string, after: number, ms = 5000): Promise<Pushed> {
    const deadline = Date.now() + ms;
    for (;;) {
      const hit = this.received.slice(after).find((r) => r.path === path);
      if (hit) return hit;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`nothing pushed to ${path} within ${ms} ms`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** A browser's push subscription: its endpoint and its keys (the private one stays here). */
export class Subscriber {
  readonly ecdh = createECDH('prime256v1');
  readonly auth = randomBytes(16);
  readonly path = `/push/${randomBytes(8).toString('hex')}`;
  constructor(readonly origin: string) {
    this.ecdh.generateKeys();
  }

  /** PushSubscription.toJSON(), as a browser hands it over. */
  toJSON() {
    return {
      endpoint: `${this.origin}${this.path}`,
      keys: { p256dh: this.ecdh.getPublicKey().toString('base64url'), auth: this.auth.toString('base64url') },
    };
  }

  /**
   * Decrypts an aes128gcm message (RFC 8291 over RFC 8188), written here from the RFCs with
   * node:crypto: header salt(16) rs(4) idlen(1) keyid (the sender's ephemeral public key), then
   * records; keys from ECDH with our private key, HKDF with the auth secret.
   */
  decrypt(body: Buffer): string {
    const salt = body.subarray(0, 16);
    const rs = body.readUInt32BE(16);
    const idlen = body.readUInt8(20);
    const senderPublic = body.subarray(21, 21 + idlen);
    const records = body.subarray(21 + idlen);
    const ecdhSecret = this.ecdh.computeSecret(senderPublic);
    const keyInfo = Buffer.concat([Buffer.from('WebPush: info\0'), this.ecdh.getPublicKey(), senderPublic]);
    const ikm = Buffer.from(hkdfSync('sha256', ecdhSecret, this.auth, keyInfo, 32));
    const cek = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: aes128gcm\0'), 16));
    const nonce = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: nonce\0'), 12));
    const out: Buffer[] = [];
    for (let i = 0, seq = 0; i < records.length; i += rs, seq++) {
      const rec = records.subarray(i, Math.min(i + rs, records.length));
      const iv = Buffer.from(nonce);
      // NONCE XOR SEQ (96-bit big-endian); the record counts here fit the low 32 bits.
      iv.writeUInt32BE((iv.readUInt32BE(8) ^ seq) >>> 0, 8);
      const d = createDecipheriv('aes-128-gcm', cek, iv);
      d.setAuthTag(rec.subarray(rec.length - 16));
      const plain = Buffer.concat([d.update(rec.subarray(0, rec.length - 16)), d.final()]);
      // Padding: the delimiter (2 in the last record, 1 before) followed by zeros.
      let end = plain.length - 1;
      while (end >= 0 && plain[end] === 0) end--;
      if (plain[end] !== 1 && plain[end] !== 2) throw new Error('bad padding delimiter');
      out.push(plain.subarray(0, end));
    }
    return Buffer.concat(out).toString('utf8');
  }
}
