import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';

/**
 * A software WebAuthn authenticator for API tests (the browser tests use Chromium's virtual
 * authenticator instead): ES256 keys, "none" attestation, a signature counter, and flags chosen by
 * the test (user verification, backup eligibility), so that each thing the service must refuse can
 * be produced on purpose. Written from the WebAuthn Level 3 data layouts (authenticator data,
 * COSE_Key, CBOR), independently of the library the service uses to check them.
 */

type Cbor = number | string | Uint8Array | Cbor[] | Map<Cbor, Cbor> | { [k: string]: Cbor };

function head(major: number, n: number): Buffer {
  if (n < 24) return Buffer.from([(major << 5) | n]);
  if (n < 256) return Buffer.from([(major << 5) | 24, n]);
  if (n < 65536) return Buffer.from([(major << 5) | 25, n >> 8, n & 255]);
  const b = Buffer.alloc(5);
  b[0] = (major << 5) | 26;
  b.writeUInt32BE(n, 1);
  return b;
}

export function cbor(v: Cbor): Buffer {
  if (typeof v === 'number') return v >= 0 ? head(0, v) : head(1, -1 - v);
  if (typeof v === 'string') {
    const b = Buffer.from(v, 'utf8');
    return Buffer.concat([head(3, b.length), b]);
  }
  if (v instanceof Uint8Array) return Buffer.concat([head(2, v.length), Buffer.from(v)]);
  if (Array.isArray(v)) return Buffer.concat([head(4, v.length), ...v.map(cbor)]);
  const entries = v instanceof Map ? [...v.entries()] : Object.entries(v);
  return Buffer.concat([head(5, entries.length), ...entries.flatMap(([k, x]) => [cbor(k), cbor(x)])]);
}

const b64u = (b: Uint8Array | string) => Buffer.from(b).toString('base64url');
const sha256 = (b: Uint8Array | string) => createHash('sha256').update(b).digest();

export interface KeyOptions {
  /** The authenticator verifies its user (UV flag). Default true. */
  uv?: boolean;
  /** Backup eligible and backed up (a synced passkey). Default false. */
  synced?: boolean;
}

export class SoftKey {
  readonly id = randomBytes(16);
  private readonly priv: KeyObject;
  private readonly cose: Buffer;
  counter = 0;
  constructor(
    readonly rpId: string,
    readonly origin: string,
    readonly opts: KeyOptions = {},
  ) {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    this.priv = privateKey;
    const jwk = publicKey.export({ format: 'jwk' });
    this.cose = cbor(
      new Map<Cbor, Cbor>([
        [1, 2],
        [3, -7],
        [-1, 1],
        [-2, Buffer.from(String(jwk.x), 'base64url')],
        [-3, Buffer.from(String(jwk.y), 'base64url')],
      ]),
    );
  }

  private flags(attested: boolean, uv: boolean): number {
    let f = 0x01; // user present
    if (uv) f |= 0x04;
    if (this.opts.synced) f |= 0x08 | 0x10;
    if (attested) f |= 0x40;
    return f;
  }

  private authData(attested: boolean, o: { rpId?: string; uv?: boolean; counter?: number } = {}): Buffer {
    const counter = Buffer.alloc(4);
    counter.writeUInt32BE(o.counter ?? this.counter);
    const parts: Buffer[] = [
      sha256(o.rpId ?? this.rpId),
      Buffer.from([this.flags(attested, o.uv ?? this.opts.uv ?? true)]),
      counter,
    ];
    if (attested) {
      const len = Buffer.alloc(2);
      len.writeUInt16BE(this.id.length);
      parts.push(Buffer.alloc(16), len, this.id, this.cose);
    }
    return Buffer.concat(parts);
  }

  /** navigator.credentials.create()'s answer, as JSON, to creation options. */
  create(options: { challenge: string }, o: { origin?: string; rk?: boolean } = {}) {
    const clientDataJSON = JSON.stringify({
      type: 'webauthn.create',
      challenge: options.challenge,
      origin: o.origin ?? this.origin,
      crossOrigin: false,
    });
    const attestationObject = cbor({ fmt: 'none', attStmt: {}, authData: this.authData(true) });
    return {
      id: b64u(this.id),
      rawId: b64u(this.id),
      type: 'public-key',
      response: {
        clientDataJSON: b64u(clientDataJSON),
        attestationObject: b64u(attestationObject),
        transports: ['usb'],
      },
      clientExtensionResults: { credProps: { rk: o.rk ?? true } },
    };
  }

  /**
   * navigator.credentials.get()'s answer to request options. The counter goes up by one unless
   * `counter` says otherwise (a clone answers with its own, stale counter).
   */
  get(
    options: { challenge: string },
    o: { origin?: string; rpId?: string; uv?: boolean; counter?: number; userHandle?: string } = {},
  ) {
    if (o.counter === undefined) this.counter += 1;
    const clientDataJSON = Buffer.from(
      JSON.stringify({
        type: 'webauthn.get',
        challenge: options.challenge,
        origin: o.origin ?? this.origin,
        crossOrigin: false,
      }),
    );
    const authenticatorData = this.authData(false, o);
    const signature = sign('sha256', Buffer.concat([authenticatorData, sha256(clientDataJSON)]), this.priv);
    return {
      id: b64u(this.id),
      rawId: b64u(this.id),
      type: 'public-key',
      response: {
        clientDataJSON: b64u(clientDataJSON),
        authenticatorData: b64u(authenticatorData),
        signature: b64u(signature),
        ...(o.userHandle !== undefined ? { userHandle: o.userHandle } : {}),
      },
      clientExtensionResults: {},
    };
  }
}

/** The user handle the service gives a user's keys (its ID's bytes, base64url). */
export const handleOf = (userId: string) => b64u(userId);
