import pino, { type Logger } from 'pino';

/** The one logger of a process (service or proxy): JSON lines on stdout, secrets redacted. */
export function createLogger(level: string): Logger {
  return pino({
    level,
    // Belt and braces: request logs never include headers, but nothing secret may slip through.
    redact: ['req.headers.authorization', 'req.headers.cookie', '*.password', '*.Secret', '*.Code'],
  });
}
