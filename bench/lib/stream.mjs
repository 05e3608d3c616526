// Reading a long HTTP response to its end, counting JSON lines, with timings.
import http from 'node:http';

/**
 * GETs `url` and reads the whole body, counting bytes and newline-terminated lines.
 * Returns { status, contentType, bytes, lines, firstByteMs, totalMs }.
 */
export function readWholeBody(url, headers = {}, limitMs = 120_000) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let firstByteMs;
    const req = http.get(url, { headers, agent: false }, (res) => {
      let bytes = 0;
      let lines = 0;
      res.on('data', (chunk) => {
        if (firstByteMs === undefined) firstByteMs = performance.now() - t0;
        bytes += chunk.length;
        let i = chunk.indexOf(10);
        while (i !== -1) {
          lines++;
          i = chunk.indexOf(10, i + 1);
        }
      });
      res.on('end', () => {
        clearTimeout(timer);
        resolve({
          status: res.statusCode,
          contentType: res.headers['content-type'],
          bytes,
          lines,
          firstByteMs,
          totalMs: performance.now() - t0,
        });
      });
      res.on('error', reject);
    });
    const timer = setTimeout(
      () => req.destroy(new Error(`no complete response within ${limitMs} ms`)),
      limitMs,
    );
    req.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}
