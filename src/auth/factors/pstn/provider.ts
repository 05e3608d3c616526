import { randomBytes } from 'node:crypto';
import { appendFile, mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import type { ServiceConfig } from '../../../config/index.js';

export type PstnMode = 'sms' | 'voice';

/** Sends a short text to a phone: as an SMS, or read out by a voice call. */
export interface PstnProvider {
  /** Resolves once the provider accepted it; throws otherwise. */
  send(to: string, mode: PstnMode, text: string): Promise<void>;
}

/** Every call to the provider is bounded. */
const REQUEST_MS = 10_000;

const xml = (s: string) => s.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * The common SMS/voice HTTP API shape (Twilio's, also offered by several others): HTTP Basic with
 * the account SID and token, form-encoded bodies; an SMS is POST
 * {base}/2010-04-01/Accounts/{sid}/Messages.json (To, From, Body), a call is POST
 * .../Calls.json (To, From, Twiml: the text read out twice). 2xx is accepted; anything else, or no
 * answer within 10 s, is an error (its body is not logged: it may echo the message).
 */
export function httpProvider(config: ServiceConfig['pstn']): PstnProvider {
  const base = `${config.baseurl.replace(/\/+$/, '')}/2010-04-01/Accounts/${encodeURIComponent(config.accountsid)}`;
  const auth = `Basic ${Buffer.from(`${config.accountsid}:${config.token}`).toString('base64')}`;
  return {
    async send(to, mode, text) {
      const body = new URLSearchParams({ To: to, From: config.from });
      if (mode === 'sms') body.set('Body', text);
      else {
        const say = `<Say>${xml(text)}</Say>`;
        body.set('Twiml', `<Response>${say}<Pause length="1"/>${say}</Response>`);
      }
      const res = await fetch(`${base}/${mode === 'sms' ? 'Messages' : 'Calls'}.json`, {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' },
        body,
        signal: AbortSignal.timeout(REQUEST_MS),
        redirect: 'error',
      });
      await res.arrayBuffer().catch(() => undefined);
      if (!res.ok) throw new Error(`the SMS/voice provider answered ${res.status}`);
    },
  };
}

/**
 * Development: each message is appended as a JSON line to `<pstn.folder>/messages.jsonl` and the
 * log says where (the message holds a code: the log line does not).
 */
export function folderProvider(config: ServiceConfig['pstn'], logger: Logger): PstnProvider {
  const folder = resolve(config.folder);
  return {
    async send(to, mode, text) {
      await mkdir(folder, { recursive: true, mode: 0o700 });
      const file = join(folder, 'messages.jsonl');
      const line = JSON.stringify({
        ID: randomBytes(6).toString('hex'),
        Time: new Date().toISOString(),
        To: to,
        Mode: mode,
        Text: text,
      });
      await appendFile(file, `${line}\n`, { mode: 0o600 });
      logger.info(
        { file, mode },
        'pstn.provider is folder: the message was written to a file instead of sent',
      );
    },
  };
}

export const createProvider = (config: ServiceConfig['pstn'], logger: Logger): PstnProvider =>
  config.provider === 'http' ? httpProvider(config) : folderProvider(config, logger);
