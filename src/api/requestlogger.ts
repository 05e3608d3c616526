import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/**
 * Fastify's childLoggerFactory: each request's logger (req.log, reply.log). Pino's child with the
 * request id costs a few microseconds to make (its bindings go through the redaction), and most
 * requests write no line at the configured level: the child is made when the request first
 * writes one, and every line is the child's, byte for byte. A route with its own log level or
 * serializers, or a logger that cannot say which levels it writes, gets pino's child at once.
 */
export function requestLogger(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  opts: ChildLoggerOptions,
): FastifyBaseLogger {
  if (Object.keys(opts).length > 0 || typeof (logger as Partial<Logger>).isLevelEnabled !== 'function')
    return logger.child(bindings, opts);
  return new LazyChild(logger as Logger, bindings) as unknown as FastifyBaseLogger;
}

class LazyChild {
  readonly #parent: Logger;
  readonly #bindings: Bindings;
  #child: Logger | undefined;

  constructor(parent: Logger, bindings: Bindings) {
    this.#parent = parent;
    this.#bindings = bindings;
  }

  /** Pino's child, as Fastify makes it (bindings, no options), made once. */
  get #log(): Logger {
    this.#child ??= this.#parent.child(this.#bindings);
    return this.#child;
  }

  #write(level: Level, args: unknown[]): void {
    if (this.#child === undefined && !this.#parent.isLevelEnabled(level)) return;
    const log = this.#log;
    (log[level] as (...a: unknown[]) => void).apply(log, args);
  }

  get level(): string {
    return (this.#child ?? this.#parent).level;
  }
  set level(level: string) {
    this.#log.level = level;
  }
  isLevelEnabled(level: string): boolean {
    return (this.#child ?? this.#parent).isLevelEnabled(level);
  }
  bindings(): Bindings {
    return this.#log.bindings();
  }
  child(bindings: Bindings, options?: ChildLoggerOptions): Logger {
    return this.#log.child(bindings, options);
  }
  fatal(...args: unknown[]): void {
    this.#write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.#write('error', args);
  }
  warn(...args: unknown[]): void {
    this.#write('warn', args);
  }
  info(...args: unknown[]): void {
    this.#write('info', args);
  }
  debug(...args: unknown[]): void {
    this.#write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.#write('trace', args);
  }
  silent(): void {}
}
