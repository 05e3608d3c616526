/**
 * Generators of HTTP/1.1 messages as attackers write them: mostly well-formed, with one or two
 * parts spelled the way parsers disagree about (framing headers in every combination, chunked
 * bodies with extensions, trailers and odd sizes, bare CR or LF, NUL, obs-fold, obs-text).
 * Messages are latin1 strings: one character per byte.
 */
import fc from 'fast-check';

let currentRareWeight = 3;

/** Builds arbitraries whose `pick`s default to `rareWeight` in 20 for the rare choices. */
export function withRareWeight<T>(rareWeight: number, build: () => T): T {
  const before = currentRareWeight;
  currentRareWeight = rareWeight;
  try {
    return build();
  } finally {
    currentRareWeight = before;
  }
}

/** Mostly one of `common`, now and then (`rareWeight` in 20) one of `rare`. */
export function pick<T>(
  common: readonly T[],
  rare: readonly T[] = [],
  rareWeight = currentRareWeight,
): fc.Arbitrary<T> {
  if (rare.length === 0 || rareWeight === 0) return fc.constantFrom(...common);
  return fc.oneof(
    { weight: 20, arbitrary: fc.constantFrom(...common) },
    { weight: rareWeight, arbitrary: fc.constantFrom(...rare) },
  );
}

/** `arb` once in `oneIn` cases, else null. */
export function sometimes<T>(arb: fc.Arbitrary<T>, oneIn: number): fc.Arbitrary<T | null> {
  return fc.oneof({ weight: oneIn - 1, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: arb });
}

/** A line ending: CRLF, or what lenient parsers also take. */
export const eolWith = (rareWeight: number) => pick(['\r\n'], ['\n', '\r', '\r\r\n', ' \r\n'], rareWeight);
export const eol = eolWith(3);

/** Body bytes: short, with line ends, digits and bytes that look like the start of a message. */
export const bodyText = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.string({
      unit: fc.constantFrom('a', 'b', '0', '\r', '\n', ' ', ';', '\x00', '\xff'),
      maxLength: 10,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '0\r\n\r\n',
      '\r\n0\r\n\r\n',
      'HTTP/1.1 200 OK\r\n\r\n',
      'GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n',
    ),
  },
);

/** Ordinary and odd header lines that carry no framing. */
export function fieldLine(
  names: readonly string[],
  values: readonly string[],
  rareWeight = currentRareWeight,
) {
  const name = pick(names, ['x_a', 'X A', 'X-(A)', '', 'X-\xe9', ' X-A', 'X-A\x00', 'X-A\t'], rareWeight);
  const colon = pick([': ', ':'], [' : ', ':\t', ' :', '::', ':  '], rareWeight);
  const value = pick(
    values,
    [' v ', 'a\tb', '\x80\xff', 'a\x00b', 'a\x7fb', 'a\rb', 'a\nb', 'v\t'],
    rareWeight,
  );
  return fc.tuple(name, colon, value, eolWith(rareWeight)).map(([n, c, v, e]) => `${n}${c}${v}${e}`);
}

/** An obsolete line folding: a continuation line of the header before it. */
export const foldLine = fc.constantFrom(' folded\r\n', '\tfolded\r\n', ' \r\n');

/**
 * The framing generators: Content-Length and Transfer-Encoding lines, chunked bodies. Their rare
 * spellings come at `pick`'s current weight (see withRareWeight).
 */
function buildFraming() {
  const rareWeight = currentRareWeight;
  /** How a length is written: the plain number, or spellings parsers read differently. */
  const lengthSpelling = pick(
    ['n'],
    ['0n', ' n ', 'n, n', 'n,m', '+n', '-n', 'n.0', '0xh', '', 'n n', '18446744073709551617', 'm'],
  );

  function spellLength(form: string, n: number): string {
    if (form === '18446744073709551617' || form === '') return form;
    return form
      .replace('0xh', `0x${n.toString(16)}`)
      .replace(/m/g, String(n + 1))
      .replace(/n/g, String(n));
  }

  /** A Content-Length framed body: header lines and body, the length right or wrong. */
  const sized = fc
    .record({
      body: bodyText,
      name: pick(
        ['Content-Length'],
        ['content-length', 'CONTENT-LENGTH', 'Content-Length ', 'Content_Length'],
      ),
      form: lengthSpelling,
      again: sometimes(lengthSpelling, 6),
      delta: pick([0], [-1, 1, 4]),
      eol: eolWith(rareWeight),
    })
    .map(({ body, name, form, again, delta, eol: e }) => {
      const n = Math.max(0, body.length + delta);
      const lines = [`${name}: ${spellLength(form, n)}${e}`];
      if (again !== null) lines.push(`${name}: ${spellLength(again, n)}\r\n`);
      return { lines, body };
    });

  const chunkSize = pick(
    ['h'],
    ['H', '0h', '000h', '0xh', 'h ', 'h\t', '+h', ' h', 'next', 'prev', '-h', 'h_'],
  );
  const chunkExt = pick(
    [''],
    [';a', ';a=b', ';a="b c"', '; a=b', ';a=b;c=d', ';\x80', ';"', ';a=\x01', ';a b', ' ;a', ';a=b ', ';=b'],
  );
  const chunkEnd = pick(['\r\n'], ['\n', '', '\r', 'x\r\n', '\r\n\r\n']);

  const chunk = fc
    .record({
      data: bodyText.filter((s) => s.length > 0),
      size: chunkSize,
      ext: chunkExt,
      line: eolWith(rareWeight),
      end: chunkEnd,
    })
    .map(({ data, size, ext, line, end }) => {
      const hex = data.length.toString(16);
      const s =
        size === 'next'
          ? (data.length + 1).toString(16)
          : size === 'prev'
            ? (data.length - 1).toString(16)
            : size === 'H'
              ? hex.toUpperCase()
              : size.replace('h', hex);
      return { text: `${s}${ext}${line}${data}${end}`, data };
    });

  /** A chunked body: chunks, the last chunk, trailers and the final line, each possibly odd. */
  const chunkedBody = fc
    .record({
      chunks: fc.array(chunk, { maxLength: 3 }),
      last: pick(['0'], ['00', '000', '0;a=b', '0 ', 'x', '']),
      lastLine: eolWith(rareWeight),
      trailers: fc.array(
        pick(
          ['X-T: 1\r\n'],
          [
            'Content-Length: 5\r\n',
            'bad trailer\r\n',
            ' folded\r\n',
            'X-T:\x01\r\n',
            'X-T: 1\n',
            'Transfer-Encoding: chunked\r\n',
          ],
        ),
        { maxLength: 2 },
      ),
      end: pick(['\r\n'], ['\n', '', '\r']),
    })
    .map(({ chunks, last, lastLine, trailers, end }) => ({
      body: `${chunks.map((c) => c.text).join('')}${last}${lastLine}${trailers.join('')}${end}`,
      trailers: trailers.length > 0,
    }));

  /** Transfer-Encoding lines: "chunked", or values and repetitions parsers disagree about. */
  const transferEncoding = fc
    .record({
      name: pick(
        ['Transfer-Encoding'],
        ['transfer-encoding', 'Transfer_Encoding', 'Transfer-Encoding ', 'TRANSFER-ENCODING'],
      ),
      value: pick(
        ['chunked'],
        [
          'Chunked',
          'CHUNKED',
          ' chunked',
          'chunked ',
          'gzip, chunked',
          'chunked, gzip',
          'identity',
          'chunked, chunked',
          'chunked;q=1',
          'xchunked',
          'chunk',
          'gzip',
          '\tchunked',
          'chunked\x0b',
        ],
      ),
      again: sometimes(pick(['chunked'], ['gzip', 'identity']), 8),
      eol: eolWith(rareWeight),
    })
    .map(({ name, value, again, eol: e }) => {
      const lines = [`${name}: ${value}${e}`];
      if (again !== null) lines.push(`${name}: ${again}\r\n`);
      return lines;
    });

  /** A body with its framing header lines: Content-Length, chunked, both, or none. */
  const framed = fc.oneof(
    { weight: 4, arbitrary: sized.map((s) => ({ ...s, trailers: false })) },
    {
      weight: 4,
      arbitrary: fc
        .tuple(transferEncoding, chunkedBody)
        .map(([lines, c]) => ({ lines, body: c.body, trailers: c.trailers })),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(sized, transferEncoding, chunkedBody, fc.boolean()).map(([s, te, c, teFirst]) => ({
        lines: teFirst ? [...te, ...s.lines] : [...s.lines, ...te],
        body: c.body,
        trailers: c.trailers,
      })),
    },
    { weight: 2, arbitrary: bodyText.map((body) => ({ lines: [] as string[], body, trailers: false })) },
  );

  return framed;
}

/** A body with its framing header lines: Content-Length, chunked, both, or none. */
export const framed = buildFraming();

/** The same with rare spellings at `rareWeight` in 20 (0: only well-formed ones). */
export const framedWith = (rareWeight: number) => withRareWeight(rareWeight, buildFraming);

/** Inserts `lines` into `into` at `at` (modulo its length + 1). */
export function insertAt(into: string[], at: number, lines: string[]): string[] {
  const i = at % (into.length + 1);
  return [...into.slice(0, i), ...lines, ...into.slice(i)];
}
