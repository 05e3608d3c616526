/**
 * The service's icon: the pages' logo (a rounded square in the header's blue-to-violet gradient)
 * with a white gateway arch. Served as /favicon.svg, and as /favicon.ico (a 32×32 PNG in an ICO
 * container, drawn here from the same shapes) for browsers without SVG icons and for clients that
 * ask for /favicon.ico by default.
 */
import { createHash } from 'node:crypto';
import { crc32, deflateSync } from 'node:zlib';

const SIZE = 32;
const RADIUS = 8;
const FROM = [0x37, 0x54, 0xd6] as const; // #3754d6, top left
const TO = [0x7b, 0x5c, 0xf0] as const; // #7b5cf0, bottom right

export const FAVICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="${SIZE}" height="${SIZE}" viewBox="0 0 ${SIZE} ${SIZE}">
<defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1"><stop offset="0" stop-color="#3754d6"/><stop offset="1" stop-color="#7b5cf0"/></linearGradient></defs>
<rect width="${SIZE}" height="${SIZE}" rx="${RADIUS}" fill="url(#g)"/>
<path d="M10 26V15a6 6 0 0 1 12 0v11z" fill="#fff"/>
</svg>
`;

/** Inside the rounded square. */
function inSquare(x: number, y: number): boolean {
  const dx = Math.max(RADIUS - x, 0, x - (SIZE - RADIUS));
  const dy = Math.max(RADIUS - y, 0, y - (SIZE - RADIUS));
  return x >= 0 && y >= 0 && x <= SIZE && y <= SIZE && dx * dx + dy * dy <= RADIUS * RADIUS;
}

/** Inside the arch: M10 26 V15 a6 6 0 0 1 12 0 v11 z. */
function inArch(x: number, y: number): boolean {
  if (x < 10 || x > 22 || y > 26) return false;
  return y >= 15 || (x - 16) ** 2 + (y - 15) ** 2 <= 36;
}

/** RGBA pixels, 4×4 samples per pixel for smooth edges. */
function drawPixels(): Buffer {
  const px = Buffer.alloc(SIZE * SIZE * 4);
  const n = 4;
  for (let y = 0; y < SIZE; y++) {
    for (let x = 0; x < SIZE; x++) {
      let covered = 0;
      const sum = [0, 0, 0];
      for (let sy = 0; sy < n; sy++) {
        for (let sx = 0; sx < n; sx++) {
          const u = x + (sx + 0.5) / n;
          const v = y + (sy + 0.5) / n;
          if (!inSquare(u, v)) continue;
          covered++;
          const t = (u + v) / (2 * SIZE);
          for (let c = 0; c < 3; c++)
            sum[c] =
              (sum[c] as number) +
              (inArch(u, v) ? 255 : (FROM[c] as number) + ((TO[c] as number) - (FROM[c] as number)) * t);
        }
      }
      const at = (y * SIZE + x) * 4;
      if (covered === 0) continue;
      for (let c = 0; c < 3; c++) px[at + c] = Math.round((sum[c] as number) / covered);
      px[at + 3] = Math.round((255 * covered) / (n * n));
    }
  }
  return px;
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'ascii');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
  return Buffer.concat([head, data, crc]);
}

/** A PNG (8-bit RGBA, no filtering) of the icon. */
export function faviconPng(): Buffer {
  const pixels = drawPixels();
  const rows = Buffer.alloc(SIZE * (SIZE * 4 + 1));
  for (let y = 0; y < SIZE; y++) pixels.copy(rows, y * (SIZE * 4 + 1) + 1, y * SIZE * 4, (y + 1) * SIZE * 4);
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(SIZE, 0);
  ihdr.writeUInt32BE(SIZE, 4);
  ihdr.set([8, 6, 0, 0, 0], 8); // bit depth 8, colour type 6 (RGBA), deflate, no filter, no interlace
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(rows, { level: 9 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** An ICO file holding one 32×32 PNG image (Windows Vista+ and every current browser read these). */
function icoOf(png: Buffer): Buffer {
  const head = Buffer.alloc(6 + 16);
  head.writeUInt16LE(0, 0); // reserved
  head.writeUInt16LE(1, 2); // type: icon
  head.writeUInt16LE(1, 4); // one image
  head.writeUInt8(SIZE, 6); // width
  head.writeUInt8(SIZE, 7); // height
  head.writeUInt8(0, 8); // no palette
  head.writeUInt8(0, 9); // reserved
  head.writeUInt16LE(1, 10); // colour planes
  head.writeUInt16LE(32, 12); // bits per pixel
  head.writeUInt32LE(png.length, 14);
  head.writeUInt32LE(head.length, 18); // the image follows the directory
  return Buffer.concat([head, png]);
}

export const FAVICON_ICO = icoOf(faviconPng());

/** A strong validator for a fixed body. */
export const etagOf = (body: string | Buffer) =>
  `"${createHash('sha256').update(body).digest('base64url').slice(0, 16)}"`;

/** The page-head links to the icons, for every page of the service. */
export const ICON_LINKS =
  '<link rel="icon" href="/favicon.ico" sizes="32x32"><link rel="icon" href="/favicon.svg" type="image/svg+xml">';
