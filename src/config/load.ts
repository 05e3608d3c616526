import { readFileSync } from 'node:fs';
import { parse as parseIni } from 'ini';
import type { SectionValues, Setting } from './setting.js';

export class ConfigError extends Error {
  constructor(
    readonly key: string,
    message: string,
  ) {
    super(`${key}: ${message}`);
    this.name = 'ConfigError';
  }
}

export interface ConfigSources {
  /** Path of an INI-like file (-C). */
  file?: string;
  env?: NodeJS.ProcessEnv;
  /** Values given as flags, by flag name (commander's camelCase is mapped by the caller). */
  flags?: Record<string, string | undefined>;
  /** The file already read by readConfigFile (used instead of reading `file` again). */
  fileValues?: Map<string, string>;
}

/** Reads an INI-like file into a flat map of `section.name` keys. */
export function readConfigFile(path: string): Map<string, string> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ConfigError('-C', `cannot read ${path}: ${(e as Error).message}`);
  }
  checkLines(path, text);
  const out = new Map<string, string>();
  const walk = (obj: Record<string, unknown>, prefix: string) => {
    for (const [k, v] of Object.entries(obj)) {
      const key = prefix ? `${prefix}.${k}` : k;
      if (v !== null && typeof v === 'object' && !Array.isArray(v)) walk(v as Record<string, unknown>, key);
      else out.set(key, String(v));
    }
  };
  walk(parseIni(text), '');
  return out;
}

/**
 * Every line of a settings file is blank, a comment (`;` or `#`), a `[section]` header or
 * `key = value`. The INI parser would take anything else as a key of its own (`[server` became a
 * setting named "[server"), so the file is checked first and a bad line stops start-up by number.
 */
function checkLines(path: string, text: string) {
  const lines = text.split(/\r?\n/);
  for (const [i, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith(';') || line.startsWith('#')) continue;
    if (line.startsWith('[')) {
      if (/^\[[^\]]+\]$/.test(line)) continue;
      throw new ConfigError('-C', `${path} line ${i + 1}: ${JSON.stringify(raw)} is not a [section] header`);
    }
    const eq = line.indexOf('=');
    if (eq > 0 && line.slice(0, eq).trim() !== '') continue;
    throw new ConfigError(
      '-C',
      `${path} line ${i + 1}: ${JSON.stringify(raw)} is not "key = value", a [section] header or a comment`,
    );
  }
}

/**
 * The environment variables that look like settings of these sections (`SVC_<SECTION>_<NAME>`)
 * but are none: a misspelt variable would otherwise be ignored without a word. Start-up goes on
 * (the variable may be meant for another program); the caller warns, naming each.
 */
export function unknownEnvSettings(
  sections: Record<string, Record<string, Setting<unknown>>>,
  env: NodeJS.ProcessEnv,
): string[] {
  const known = new Set<string>();
  const prefixes = new Set<string>();
  for (const section of Object.values(sections))
    for (const s of Object.values(section)) {
      known.add(s.env);
      prefixes.add(`${s.env.split('_').slice(0, 2).join('_')}_`);
    }
  return Object.keys(env)
    .filter((name) => !known.has(name) && [...prefixes].some((p) => name.startsWith(p)))
    .sort();
}

/**
 * Resolves one or more sections. Precedence: flags > environment > file > defaults.
 * Unknown keys in the file are errors (a typo must not silently fall back to a default),
 * except keys of sections listed in `otherSections`, which belong to another command.
 * When `explicit` is given, the `section.name` key of every setting that got its value from a
 * flag, the environment or the file (not from its default) is added to it.
 */
export function loadSections<S extends Record<string, Record<string, Setting<unknown>>>>(
  sections: S,
  sources: ConfigSources,
  otherSections: string[] = [],
  explicit?: Set<string>,
): { [K in keyof S]: SectionValues<S[K]> } {
  const file =
    sources.fileValues ?? (sources.file ? readConfigFile(sources.file) : new Map<string, string>());
  const env = sources.env ?? {};
  const flags = sources.flags ?? {};
  const known = new Set<string>();
  const result: Record<string, Record<string, unknown>> = {};
  for (const [sectionName, section] of Object.entries(sections)) {
    const values: Record<string, unknown> = {};
    for (const [name, setting] of Object.entries(section)) {
      known.add(setting.key);
      const fromFlag = setting.flag ? flags[setting.flag] : undefined;
      const fromEnv = env[setting.env];
      const fromFile = file.get(setting.key);
      const [raw, origin] =
        fromFlag !== undefined
          ? [fromFlag, `--${setting.flag}`]
          : fromEnv !== undefined
            ? [fromEnv, setting.env]
            : fromFile !== undefined
              ? [fromFile, setting.key]
              : [undefined, ''];
      if (raw === undefined) {
        values[name] = setting.default;
        continue;
      }
      try {
        values[name] = setting.parse(raw);
        explicit?.add(setting.key);
      } catch (e) {
        const where = origin === setting.key ? setting.key : `${setting.key} (from ${origin})`;
        throw new ConfigError(where, (e as Error).message);
      }
    }
    result[sectionName] = values;
  }
  for (const key of file.keys()) {
    const section = key.split('.')[0] ?? '';
    if (!known.has(key) && !otherSections.includes(section)) throw new ConfigError(key, 'unknown setting');
  }
  return result as { [K in keyof S]: SectionValues<S[K]> };
}
