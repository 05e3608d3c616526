import { type ConfigSources, loadSections, unknownEnvSettings } from './load.js';
import { bootstrapSection, mailSection, pstnSection, pushSection, serverSection } from './server.js';
import type { SectionValues } from './setting.js';

export { ConfigError } from './load.js';

export interface ServiceConfig {
  server: SectionValues<typeof serverSection>;
  mail: SectionValues<typeof mailSection>;
  pstn: SectionValues<typeof pstnSection>;
  push: SectionValues<typeof pushSection>;
  bootstrap: SectionValues<typeof bootstrapSection>;
}

/** Settings of `gatehouse serve` (and the commands that open its database). */
export function loadServiceConfig(sources: ConfigSources): ServiceConfig {
  // A shared file may also hold the proxy's sections; those are the proxy's to validate.
  return loadSections(SERVICE_SECTIONS, sources, ['proxy', 'auth', 'redirect', 'acme', 'prefix']);
}

const SERVICE_SECTIONS = {
  server: serverSection,
  mail: mailSection,
  pstn: pstnSection,
  push: pushSection,
  bootstrap: bootstrapSection,
};

/** `SVC_SERVER_LISTN` and the like: variables of the service's sections that are no setting. */
export const unknownServiceEnv = (env: NodeJS.ProcessEnv) => unknownEnvSettings(SERVICE_SECTIONS, env);

export { bootstrapSection, mailSection, pstnSection, pushSection, serverSection };
