/**
 * Is this the start of a WebM file? A WebM file is an EBML document: it starts with the EBML
 * header element (ID 0x1A45DFA3) whose DocType child (ID 0x4282) is "webm" (Matroska files say
 * "matroska" and are refused). Only the header is read; the rest of the file is the browser's
 * recording and is stored as sent.
 *
 * Returns 'ok', 'more' (the header is not complete in `head` yet: give more bytes) or a message
 * saying why this is not WebM.
 */
export const EBML_MAGIC = Buffer.from([0x1a, 0x45, 0xdf, 0xa3]);
/** A header longer than this is not what any recorder writes (Chromium's is 31 bytes). */
export const MAX_HEADER = 4096;

/** An EBML variable-length integer at `at`: its value and length, 'more', or undefined (invalid). */
function vint(
  buf: Buffer,
  at: number,
  keepMarker: boolean,
): { value: number; len: number } | 'more' | undefined {
  if (at >= buf.length) return 'more';
  const first = buf[at] as number;
  if (first === 0) return undefined; // longer than 8 bytes: not allowed here
  let len = 1;
  while (!(first & (0x80 >> (len - 1)))) len++;
  if (at + len > buf.length) return 'more';
  let value = keepMarker ? first : first & (0xff >> len);
  for (let i = 1; i < len; i++) value = value * 256 + (buf[at + i] as number);
  return { value, len };
}

export function checkWebmHeader(head: Buffer): 'ok' | 'more' | string {
  for (let i = 0; i < EBML_MAGIC.length; i++) {
    if (i >= head.length) return 'more';
    if (head[i] !== EBML_MAGIC[i]) return 'the body is not a WebM video (no EBML header)';
  }
  const size = vint(head, 4, false);
  if (size === undefined) return 'the EBML header has an invalid size';
  if (size === 'more') return 'more';
  const start = 4 + size.len;
  const end = start + size.value;
  if (end > MAX_HEADER) return 'the EBML header is too long';
  if (end > head.length) return 'more';
  let at = start;
  while (at < end) {
    const id = vint(head, at, true);
    if (id === undefined || id === 'more') return 'the EBML header is malformed';
    const len = vint(head, at + id.len, false);
    if (len === undefined || len === 'more') return 'the EBML header is malformed';
    const body = at + id.len + len.len;
    if (body + len.value > end) return 'the EBML header is malformed';
    if (id.value === 0x4282) {
      const docType = head
        .subarray(body, body + len.value)
        .toString('latin1')
        .replace(/\0+$/, '');
      return docType === 'webm' ? 'ok' : `the EBML document is "${docType.slice(0, 32)}", not WebM`;
    }
    at = body + len.value;
  }
  return 'the EBML header names no DocType';
}
