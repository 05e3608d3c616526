/**
 * A setting is declared once: its `section.name` key, environment variable, flag,
 * default and parser. The loader derives everything else (help text, precedence,
 * error messages naming the key) from these declarations.
 */
export interface Setting<T> {
  key: string;
  env: string;
  /** Long flag without dashes, e.g. "listen" for --listen; omitted when the spec lists no flag. */
  flag?: string;
  default: T;
  description: string;
  /** Takes effect only at start: a reload (SIGHUP) keeps the old value and logs that a restart is needed. */
  restart?: boolean;
  /** Parses a raw string (file, env or flag); throws an Error with a human message when invalid. */
  parse(raw: string): T;
}

export type SectionValues<S extends Record<string, Setting<unknown>>> = {
  [K in keyof S]: S[K] extends Setting<infer T> ? T : never;
};

export const str = (
  opts: Omit<Setting<string>, 'parse'> & { validate?: (v: string) => void },
): Setting<string> => ({
  ...opts,
  parse(raw) {
    opts.validate?.(raw);
    return raw;
  },
});

export const bool = (opts: Omit<Setting<boolean>, 'parse'>): Setting<boolean> => ({
  ...opts,
  parse(raw) {
    const v = raw.trim().toLowerCase();
    if (['true', '1', 'yes', 'on'].includes(v)) return true;
    if (['false', '0', 'no', 'off'].includes(v)) return false;
    throw new Error(`expected true or false, got ${JSON.stringify(raw)}`);
  },
});

export const oneOf = <T extends string>(
  values: readonly T[],
  opts: Omit<Setting<T>, 'parse'>,
): Setting<T> => ({
  ...opts,
  parse(raw) {
    if (!(values as readonly string[]).includes(raw)) {
      throw new Error(`expected one of ${values.join(', ')}, got ${JSON.stringify(raw)}`);
    }
    return raw as T;
  },
});

export const int = (
  opts: Omit<Setting<number>, 'parse'> & { min?: number; max?: number },
): Setting<number> => ({
  ...opts,
  parse(raw) {
    if (!/^-?\d+$/.test(raw.trim())) throw new Error(`expected a whole number, got ${JSON.stringify(raw)}`);
    const n = Number(raw);
    if (opts.min !== undefined && n < opts.min) throw new Error(`must be at least ${opts.min}`);
    if (opts.max !== undefined && n > opts.max) throw new Error(`must be at most ${opts.max}`);
    return n;
  },
});

/** host:port, :port or [v6]:port; the host defaults to all interfaces when omitted. */
export function parseListen(raw: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(raw.trim());
  if (!m) throw new Error(`expected host:port or :port, got ${JSON.stringify(raw)}`);
  const port = Number(m[3]);
  if (port > 65535) throw new Error(`port ${port} is out of range`);
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}

export const listen = (opts: Omit<Setting<string>, 'parse'>): Setting<string> =>
  str({ ...opts, validate: (v) => void parseListen(v) });
