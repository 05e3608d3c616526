/**
 * The import rules of docs/architecture.md, checked by `npm run lint:imports` (part of `npm test`).
 * Layers, bottom first; a file may import its own layer and the layers below it, never above:
 *
 *   core, wire  <  config  <  schema  <  store  <  objects  <  features  <  http  <  service  <  cli
 *   features, bottom first: policy < scripts < auth < groups < events, metrics, backchannel, oidc, directory, audit, writes
 *   http: web < api
 *
 * The proxy (src/proxy) is a program of its own: it imports core, config and wire only, and only
 * the CLI imports it. The admin console (src/console) is browser code, bundled by
 * scripts/build-console.mjs: it imports nothing of the service (it reaches it over HTTP only), and
 * nothing of the service imports it. The sign-in pages' browser code (src/web/assets) is the
 * same: bundled by scripts/build-pages.mjs, it imports only its own folder and nothing imports it. Each rule's name and comment are what a failing `npm test` prints.
 */
const below = (...folders) => `^src/(${folders.join('|')})/`;
const layer = (name, from, allowed, comment) => ({
  name,
  severity: 'error',
  comment,
  from: { path: from },
  to: { path: '^src/', pathNot: below(...allowed) },
});

const CORE = ['core'];
const CONFIG = [...CORE, 'config'];
const SCHEMA = [...CONFIG, 'schema'];
const STORE = [...SCHEMA, 'store'];
const OBJECTS = [...STORE, 'wire', 'objects'];
const POLICY = [...OBJECTS, 'policy'];
const SCRIPTS = [...POLICY, 'scripts'];
const AUTH = [...SCRIPTS, 'auth'];
const GROUPS = [...AUTH, 'groups'];
const FEATURES = [...GROUPS, 'events', 'metrics', 'backchannel', 'oidc', 'directory', 'audit', 'writes'];
const WEB = [...FEATURES, 'web'];
const API = [...WEB, 'api'];
const SERVICE = [...API, 'service'];

module.exports = {
  forbidden: [
    layer('core-imports-nothing', '^src/core/', CORE,
      'src/core is the bottom layer (errors, logger, hashing, paths, text): it imports no other part of Gatehouse'),
    layer('wire-imports-nothing', '^src/wire/', ['wire'],
      'src/wire is the contract between the proxy and the service: both import it, it imports neither'),
    layer('config-imports-core-only', '^src/config/', CONFIG,
      'src/config (settings) sits just above core and imports nothing else of Gatehouse'),
    layer('schema-below-store', '^src/schema/', SCHEMA,
      'src/schema (field kinds, the ObjectType interface) may import core and config only'),
    layer('store-is-generic', '^src/store/', STORE,
      'the store is generic: it knows the type interface (src/schema), never a concrete object type or a feature'),
    layer('objects-below-features', '^src/objects/', OBJECTS,
      'object types (src/objects) are data definitions: they import schema, store, core, config and wire, never a feature or HTTP'),
    layer('policy-below-features', '^src/policy/', POLICY,
      'src/policy (the decision point) sits below every other feature: it imports objects, store and below, so every feature can ask it'),
    layer('scripts-below-auth', '^src/scripts/', SCRIPTS,
      'src/scripts (the sandbox and its hooks) sits below auth: it imports objects, store and below, never another feature or HTTP'),
    layer('auth-is-the-lowest-feature', '^src/auth/', AUTH,
      'src/auth is the lowest feature: it may not import groups, events, metrics, backchannel, HTTP or above'),
    layer('groups-above-auth-only', '^src/groups/', GROUPS,
      'src/groups may import auth and the layers below features, not events, metrics, backchannel, HTTP or above'),
    layer('features-below-http', '^src/(events|metrics|backchannel|oidc|directory|audit|writes)/', FEATURES,
      'features (events, metrics, backchannel, oidc, directory, audit, writes) never import HTTP routes or pages (src/api, src/web), the service or the CLI'),
    layer('web-below-api', '^src/web/', WEB,
      'pages (src/web) may import features and below, not src/api, the service or the CLI'),
    layer('api-below-service', '^src/api/', API,
      'HTTP routes (src/api) may import pages, features and below, never the service start-up or the CLI'),
    layer('service-below-cli', '^src/service/', SERVICE,
      'the service start-up (src/service) may import everything but the CLI and the proxy'),
    layer('proxy-is-its-own-program', '^src/proxy/', ['core', 'config', 'wire', 'proxy'],
      'the proxy reaches the service only over HTTP: it imports src/core, src/config and src/wire, nothing else of Gatehouse'),
    layer('console-is-browser-code', '^src/console/', ['console'],
      'the admin console (src/console) runs in the browser and reaches the service only through its public API: it imports nothing else of src/'),
    layer('page-assets-are-browser-code', '^src/web/assets/', ['web/assets'],
      'the sign-in pages\' browser code (src/web/assets) runs in the browser and reaches the service only over HTTP: it imports nothing else of src/'),
    {
      name: 'only-the-build-bundles-the-page-assets',
      severity: 'error',
      comment: 'no part of the service imports the pages\' browser code: it is bundled by scripts/build-pages.mjs and served as files (src/web/bundle.ts)',
      from: { path: '^src/', pathNot: '^src/web/assets/' },
      to: { path: '^src/web/assets/' },
    },
    {
      name: 'only-the-build-bundles-the-console',
      severity: 'error',
      comment: 'no part of the service imports the console: it is bundled by scripts/build-console.mjs and served as files',
      from: { path: '^src/', pathNot: '^src/console/' },
      to: { path: '^src/console/' },
    },
    {
      name: 'every-folder-has-a-layer',
      severity: 'error',
      comment:
        'a folder of src/ that no layer names is unchecked: add it to a layer in .dependency-cruiser.cjs and docs/architecture.md',
      from: { path: '^src/', pathNot: `^src/(${[...SERVICE, 'cli', 'proxy', 'console'].join('|')})/` },
      to: {},
    },
    {
      name: 'only-the-cli-starts-the-proxy',
      severity: 'error',
      comment: 'no part of the service imports the proxy; only the CLI does (with a dynamic import)',
      from: { path: '^src/', pathNot: '^src/(proxy|cli)/' },
      to: { path: '^src/proxy/' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'import cycles make layers meaningless and modules load half-initialised',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'src-never-imports-tests',
      severity: 'error',
      comment: 'production code must not depend on test code',
      from: { path: '^src/' },
      to: { path: '^(test|bench|scripts)/' },
    },
    {
      name: 'no-unresolvable-imports',
      severity: 'error',
      comment: 'an import that does not resolve is a typo or a missing dependency',
      from: { path: '^src/' },
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports count: a layer that needs another's types depends on it all the same.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
