import { $, alertBox, show } from './dom.js';

/** A frame of /events (docs/events.md) as far as the wait reads it. */
interface EventFrame {
  StatusCode?: number;
  Kind?: string;
  Item?: { Proven?: string[] };
}

/**
 * The wait of an out-of-band factor (e-mail link, push) on the sign-in page: follows this
 * session's AuthResponse (event kind Auth) until the factor is proven or refused, or the request
 * expires, then draws the sign-in again. Every wait ends; one wait at a time, whichever factor.
 */
export class FactorWait {
  private socket: WebSocket | null = null;

  constructor(private readonly render: () => unknown) {}

  stop(waitId: string): void {
    if (this.socket) {
      const ws = this.socket;
      this.socket = null;
      try {
        ws.close();
      } catch {
        /* closed */
      }
    }
    show($(waitId), false);
  }

  start(factor: string, waitId: string, until: number, refusedText: string): unknown {
    show($(waitId), true);
    if (Date.now() >= until) {
      this.stop(waitId);
      alertBox('error', 'The request has expired. Send another one.');
      return this.render();
    }
    const ws = new WebSocket(`${location.origin.replace(/^http/, 'ws')}/events`);
    this.socket = ws;
    let raised = false;
    ws.onopen = () => {
      ws.send(JSON.stringify({ Kind: 'Auth' }));
    };
    ws.onmessage = (ev) => {
      let f: EventFrame | null = null;
      try {
        f = JSON.parse(String(ev.data)) as EventFrame | null;
      } catch {
        return;
      }
      if (f?.StatusCode === 100) raised = true;
      if (f && f.Kind === 'Auth' && f.Item?.Proven && f.Item.Proven.indexOf(factor) >= 0) raised = true;
    };
    ws.onclose = (ev) => {
      if (this.socket !== ws) return;
      this.socket = null;
      if (raised || ev.code === 1000) {
        show($(waitId), false);
        alertBox('', '');
        this.render();
        return;
      }
      if (ev.code === 4001) {
        show($(waitId), false);
        alertBox('error', refusedText);
        this.render();
        return;
      }
      setTimeout(() => {
        if (!$(waitId).hidden) this.start(factor, waitId, until, refusedText);
      }, 2000);
    };
    return undefined;
  }
}
