import { type ConfigSources, loadSections } from './load.js';
import { mailSection, pstnSection, pushSection, serverSection } from './server.js';
import type { SectionValues } from './setting.js';

export { ConfigError } from './load.js';

export interface ServiceConfig {
  server: SectionValues<typeof serverSection>;
  mail: SectionValues<typeof mailSection>;
  pstn: SectionValues<typeof pstnSection>;
  push: SectionValues<typeof pushSection>;
}

/** Settings of `gatehouse serve` (and the commands that open its database). */
export function loadServiceConfig(sources: ConfigSources): ServiceConfig {
  // A shared file may also hold the proxy's sections; those are the proxy's to validate.
  return loadSections(
    { server: serverSection, mail: mailSection, pstn: pstnSection, push: pushSection },
    sources,
    ['proxy', 'auth', 'redirect', 'acme', 'prefix'],
  );
}

export { mailSection, pstnSection, pushSection, serverSection };
