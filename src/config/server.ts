import { isIP } from 'node:net';
import { int, listen, oneOf, str } from './setting.js';

/** Splits a comma-separated setting into its non-empty, trimmed entries. */
export const splitList = (v: string) =>
  v
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);

/** The `[server]` section: how `gatehouse serve` listens and where it keeps its data. */
export const serverSection = {
  listen: listen({
    key: 'server.listen',
    env: 'SVC_SERVER_LISTEN',
    flag: 'listen',
    default: '127.0.0.1:8080',
    description: 'Address and port the API listens on',
  }),
  database: str({
    key: 'server.database',
    env: 'SVC_SERVER_DATABASE',
    flag: 'database',
    default: './data/gatehouse.db',
    description: 'A SQLite file path, or a postgres:// URL',
    validate(v) {
      if (v.trim() === '') throw new Error('must not be empty');
      if (/^[a-z]+:\/\//i.test(v) && !/^postgres(ql)?:\/\//i.test(v)) {
        throw new Error('must be a file path or a postgres:// URL');
      }
    },
  }),
  cert: str({
    key: 'server.cert',
    env: 'SVC_SERVER_CERT',
    flag: 'cert',
    default: '',
    description: 'PEM certificate file; with server.key the API is served over HTTPS',
  }),
  key: str({
    key: 'server.key',
    env: 'SVC_SERVER_KEY',
    flag: 'key',
    default: '',
    description: 'PEM private key file paired with server.cert',
  }),
  signinurl: str({
    key: 'server.signinurl',
    env: 'SVC_SERVER_SIGNINURL',
    flag: 'signin-url',
    default: '',
    description: 'Public URL of the sign-in pages; {base_url}/signin when empty',
  }),
  trustproxy: str({
    key: 'server.trustproxy',
    env: 'SVC_SERVER_TRUSTPROXY',
    flag: 'trust-proxy',
    default: '',
    description:
      'Comma-separated addresses or CIDRs of reverse proxies whose X-Forwarded-For is believed (client address for logs and throttling)',
    validate(v) {
      for (const entry of splitList(v)) {
        const [addr, bits, extra] = entry.split('/');
        const family = isIP(addr ?? '');
        const max = family === 4 ? 32 : 128;
        if (
          family === 0 ||
          extra !== undefined ||
          (bits !== undefined && !(/^\d+$/.test(bits) && Number(bits) <= max))
        ) {
          throw new Error(`${JSON.stringify(entry)} is not an IP address or CIDR`);
        }
      }
    },
  }),
  databasetimeout: int({
    key: 'server.databasetimeout',
    env: 'SVC_SERVER_DATABASETIMEOUT',
    flag: 'database-timeout',
    default: 10,
    min: 1,
    max: 3600,
    description:
      'Seconds a PostgreSQL statement may go unanswered before the request fails with 503 and the connection is replaced (a network cut)',
  }),
  auditretention: int({
    key: 'server.auditretention',
    env: 'SVC_SERVER_AUDITRETENTION',
    flag: 'audit-retention',
    default: 400 * 86_400,
    min: 0,
    description: 'Seconds the audit trail keeps an entry (GET /audit); 0 keeps it for good',
  }),
  changeretention: int({
    key: 'server.changeretention',
    env: 'SVC_SERVER_CHANGERETENTION',
    flag: 'change-retention',
    default: 7 * 86_400,
    min: 0,
    description:
      'Seconds the change log keeps a write (event-stream catch-up across outages and restarts); 0 keeps it for good',
  }),
  publicurl: str({
    key: 'server.publicurl',
    env: 'SVC_SERVER_PUBLICURL',
    flag: 'public-url',
    default: '',
    description:
      'Public base URL of the service ({base_url}); the OpenID provider is {base_url}/oidc. Empty: http(s)://<server.listen>',
    validate(v) {
      if (v === '') return;
      const u = new URL(v);
      if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error('must be an http(s) URL');
      if (u.username || u.password || u.search || u.hash) throw new Error('must be a plain base URL');
      // The service is served from the root of its origin: a path would make published URLs wrong.
      if (u.pathname !== '/') throw new Error('must have no path (https://id.example.com)');
    },
  }),
  oidckey: str({
    key: 'server.oidckey',
    env: 'SVC_SERVER_OIDCKEY',
    flag: 'oidc-key',
    default: '',
    description:
      "32 bytes, base64: encrypts the OpenID provider's signing keys at rest. Empty: a key kept in the database",
    validate(v) {
      if (v !== '' && Buffer.from(v, 'base64').length !== 32) throw new Error('must be 32 bytes in base64');
    },
  }),
  loglevel: oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const, {
    key: 'server.loglevel',
    env: 'SVC_SERVER_LOGLEVEL',
    flag: 'log-level',
    default: 'info',
    description: 'Log level',
  }),
};

/**
 * The `[mail]` section: how the service sends e-mail (sign-in links). With no `mail.host` each
 * message is written to `mail.folder` instead, and the log says where (development).
 */
export const mailSection = {
  host: str({
    key: 'mail.host',
    env: 'SVC_MAIL_HOST',
    default: '',
    description: 'SMTP server host name; empty: write each message to mail.folder instead',
  }),
  port: int({
    key: 'mail.port',
    env: 'SVC_MAIL_PORT',
    default: 587,
    min: 1,
    max: 65535,
    description: 'SMTP server port (587 submission with STARTTLS, 465 TLS, 25)',
  }),
  tls: oneOf(['starttls', 'tls', 'none'] as const, {
    key: 'mail.tls',
    env: 'SVC_MAIL_TLS',
    default: 'starttls',
    description:
      'starttls: upgrade the connection and refuse to send without it; tls: TLS from the start (port 465); none: plain text (a local relay only)',
  }),
  user: str({
    key: 'mail.user',
    env: 'SVC_MAIL_USER',
    default: '',
    description: 'SMTP user name; empty: no authentication',
  }),
  password: str({
    key: 'mail.password',
    env: 'SVC_MAIL_PASSWORD',
    default: '',
    description: 'SMTP password (with mail.user)',
  }),
  from: str({
    key: 'mail.from',
    env: 'SVC_MAIL_FROM',
    default: 'Gatehouse <gatehouse@localhost>',
    description: 'Sender address of the messages',
  }),
  folder: str({
    key: 'mail.folder',
    env: 'SVC_MAIL_FOLDER',
    default: './data/mail',
    description: 'Where messages are written when mail.host is empty (development)',
  }),
};

/**
 * The `[pstn]` section: how the service sends codes by SMS or voice call. `http` speaks the
 * common SMS/voice HTTP API shape (account SID + token, form-encoded messages and calls);
 * `folder` (development) writes each message to `pstn.folder` and logs where.
 */
export const pstnSection = {
  provider: oneOf(['folder', 'http'] as const, {
    key: 'pstn.provider',
    env: 'SVC_PSTN_PROVIDER',
    default: 'folder',
    description: 'http: send through the provider API at pstn.baseurl; folder: write messages to pstn.folder',
  }),
  baseurl: str({
    key: 'pstn.baseurl',
    env: 'SVC_PSTN_BASEURL',
    default: 'https://api.twilio.com',
    description: 'Base URL of the provider API (…/2010-04-01/Accounts/<sid>/Messages.json and Calls.json)',
    validate(v) {
      if (!/^https?:\/\/[^\s/]+/.test(v)) throw new Error('must be an http(s) URL');
    },
  }),
  accountsid: str({
    key: 'pstn.accountsid',
    env: 'SVC_PSTN_ACCOUNTSID',
    default: '',
    description: 'Account SID (the user name of the API)',
  }),
  token: str({
    key: 'pstn.token',
    env: 'SVC_PSTN_TOKEN',
    default: '',
    description: 'Auth token (the password of the API)',
  }),
  from: str({
    key: 'pstn.from',
    env: 'SVC_PSTN_FROM',
    default: '',
    description: 'Sender number in E.164 (+15551234567)',
  }),
  folder: str({
    key: 'pstn.folder',
    env: 'SVC_PSTN_FOLDER',
    default: './data/pstn',
    description: 'Where messages are written with pstn.provider=folder (development)',
  }),
};

/**
 * The `[push]` section: Web Push to the devices that approve sign-ins (POST /auth/mobile/start).
 * The service posts to the endpoint a browser's subscription names: only endpoints on the listed
 * push services are accepted, so a subscription cannot make the service post elsewhere.
 */
export const pushSection = {
  subject: str({
    key: 'push.subject',
    env: 'SVC_PUSH_SUBJECT',
    default: '',
    description:
      'VAPID contact (mailto: or https: URL); empty: the sign-in URL when https, else mailto:gatehouse@localhost',
  }),
  endpoints: str({
    key: 'push.endpoints',
    env: 'SVC_PUSH_ENDPOINTS',
    default:
      'https://fcm.googleapis.com,https://updates.push.services.mozilla.com,https://web.push.apple.com,https://*.notify.windows.com',
    description:
      'Comma-separated origins (a leading *. matches subdomains) of the push services subscriptions may use',
    validate(v) {
      for (const entry of splitList(v))
        if (!/^https?:\/\/(\*\.)?[a-z0-9.-]+(:\d{1,5})?$/i.test(entry))
          throw new Error(`${JSON.stringify(entry)} is not an origin`);
    },
  }),
};

/** The longest a one-time sign-in URL of the first start or of `gatehouse recover` is good for. */
export const SETUP_LINK_MAX_SECONDS = 3600;

/**
 * The `[bootstrap]` section: the first administrator. On the first start of an empty database the
 * administrator gets `bootstrap.email`, and the service prints a one-time sign-in URL where that
 * person chooses a password (`gatehouse recover` prints another later).
 */
export const bootstrapSection = {
  email: str({
    key: 'bootstrap.email',
    env: 'SVC_BOOTSTRAP_EMAIL',
    default: '',
    description:
      "The first administrator's e-mail address; with it the first start also prints a one-time sign-in URL",
    validate(v) {
      if (v !== '' && !/^[^\s@]+@[^\s@]+$/.test(v)) throw new Error('must be an e-mail address');
    },
  }),
  linkseconds: int({
    key: 'bootstrap.linkseconds',
    env: 'SVC_BOOTSTRAP_LINKSECONDS',
    default: SETUP_LINK_MAX_SECONDS,
    min: 60,
    max: SETUP_LINK_MAX_SECONDS,
    description:
      'Seconds a one-time sign-in URL (first start, gatehouse recover) stays good; at most one hour',
  }),
};
