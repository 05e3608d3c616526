import { SMTPServer } from 'smtp-server';
import { freePort } from '../net.js';

/** One message as the SMTP server received it. */
export interface Received {
  from: string;
  to: string[];
  raw: string;
}

/**
 * A real SMTP server on 127.0.0.1 (smtp-server) that keeps every message it accepts, for the
 * service to send to (mail.host, mail.port, mail.tls=none). `failNext` makes it refuse messages.
 */
export class MailSink {
  readonly messages: Received[] = [];
  refuse = false;
  private waiters: (() => void)[] = [];
  private constructor(
    readonly server: SMTPServer,
    readonly port: number,
  ) {}

  static async start(): Promise<MailSink> {
    const port = await freePort();
    let sink: MailSink | undefined;
    const server = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS', 'AUTH'],
      logger: false,
      onData(stream, session, callback) {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          if (sink?.refuse) {
            callback(Object.assign(new Error('mailbox unavailable'), { responseCode: 550 }));
            return;
          }
          sink?.messages.push({
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            to: session.envelope.rcptTo.map((r) => r.address),
            raw: Buffer.concat(chunks).toString('utf8'),
          });
          for (const w of sink?.waiters.splice(0) ?? []) w();
          callback();
        });
      },
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    sink = new MailSink(server, port);
    return sink;
  }

  /** The service settings that send here. */
  get env(): NodeJS.ProcessEnv {
    return { SVC_MAIL_HOST: '127.0.0.1', SVC_MAIL_PORT: String(this.port), SVC_MAIL_TLS: 'none' };
  }

  /** Waits (at most `ms`) for a message to `to` after the first `after` messages; returns it. */
  async next(to: string, after: number, ms = 5000): Promise<Received> {
    const deadline = Date.now() + ms;
    for (;;) {
      const hit = this.messages.slice(after).find((m) => m.to.includes(to));
      if (hit) return hit;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no message to ${to} within ${ms} ms`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** The text of a message with quoted-printable soft breaks and escapes undone. */
export function decodedBody(raw: string): string {
  return raw
    .replace(/=\r?\n/g, '')
    .replace(/=([0-9A-F]{2})/g, (_, h: string) => String.fromCharCode(Number.parseInt(h, 16)));
}

/** The sign-in link of a message: its URL and its token (the fragment). */
export function signinLink(raw: string): { url: string; token: string } {
  const m = /(https?:\/\/[^\s"<>]+\/otp)#([a-z0-9]+\.[A-Za-z0-9_-]{43})/.exec(decodedBody(raw));
  if (!m) throw new Error(`no sign-in link in the message:\n${raw.slice(0, 3000)}`);
  return { url: `${m[1]}#${m[2]}`, token: m[2] as string };
}
