import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import nodemailer from 'nodemailer';
import type { Logger } from 'pino';
import type { ServiceConfig } from '../../../config/index.js';

/** One message; `text` and `html` say the same thing. */
export interface Message {
  to: string;
  subject: string;
  text: string;
  html: string;
}

/** Sends e-mail: over SMTP (mail.host set) or, in development, into a folder. */
export interface Mailer {
  /** Resolves once the message was accepted (by the SMTP server, or written); throws otherwise. */
  send(msg: Message): Promise<void>;
  close(): void;
}

/** Every wait on the SMTP server is bounded (connect, greeting, each command and the data). */
const CONNECT_MS = 10_000;
const GREETING_MS = 10_000;
const SOCKET_MS = 20_000;

/**
 * The service's mail sender from the `[mail]` settings (docs/signin.md, "E-mail links"). SMTP
 * with nodemailer: `tls` picks implicit TLS (465), required STARTTLS, or plain text for a local
 * relay. Without `mail.host` each message is written as an .eml file to `mail.folder` and the
 * log says where (the message holds a sign-in link: the log line does not).
 */
export function createMailer(config: ServiceConfig['mail'], logger: Logger): Mailer {
  if (config.host === '') {
    const folder = resolve(config.folder);
    const composer = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
    return {
      async send(msg) {
        const info = await composer.sendMail({ from: config.from, ...msg });
        await mkdir(folder, { recursive: true, mode: 0o700 });
        const file = join(folder, `${Date.now()}-${randomBytes(4).toString('hex')}.eml`);
        await writeFile(file, info.message as Buffer, { mode: 0o600 });
        logger.info({ file }, 'mail.host is not set: the e-mail was written to a file instead of sent');
      },
      close() {
        composer.close();
      },
    };
  }
  const transport = nodemailer.createTransport({
    host: config.host,
    port: config.port,
    secure: config.tls === 'tls',
    requireTLS: config.tls === 'starttls',
    ignoreTLS: config.tls === 'none',
    auth: config.user !== '' ? { user: config.user, pass: config.password } : undefined,
    connectionTimeout: CONNECT_MS,
    greetingTimeout: GREETING_MS,
    socketTimeout: SOCKET_MS,
  });
  return {
    async send(msg) {
      await transport.sendMail({ from: config.from, ...msg });
    },
    close() {
      transport.close();
    },
  };
}
