/**
 * The approvals app's service worker (served as /signin/mobile-sw.js, a fixed name: a service
 * worker's URL decides its scope, /signin/): shows each pushed request as a notification; a tap
 * opens the approval page. Typed with the few worker interfaces it uses (this folder's lib is DOM).
 */

/** A pushed sign-in request (src/auth/factors/mobile). */
interface Pushed {
  Type?: string;
  Token?: string;
  Service?: string;
  Email?: string;
  Browser?: string;
  Address?: string;
}

interface WorkerEvent extends Event {
  waitUntil(p: Promise<unknown>): void;
}
interface PushEvent extends WorkerEvent {
  data: { json(): Pushed } | null;
}
interface NotificationClickEvent extends WorkerEvent {
  notification: Notification & { data: { token: string } };
}
interface WorkerScope {
  addEventListener(type: 'install' | 'activate', fn: (ev: WorkerEvent) => void): void;
  addEventListener(type: 'push', fn: (ev: PushEvent) => void): void;
  addEventListener(type: 'notificationclick', fn: (ev: NotificationClickEvent) => void): void;
  skipWaiting(): Promise<void>;
  clients: {
    claim(): Promise<void>;
    matchAll(o: { type: 'window' }): Promise<{ postMessage(d: unknown): void }[]>;
    openWindow(url: string): Promise<unknown>;
  };
  registration: ServiceWorkerRegistration;
}

const worker = self as unknown as WorkerScope;

worker.addEventListener('install', () => {
  worker.skipWaiting();
});
worker.addEventListener('activate', (ev) => {
  ev.waitUntil(worker.clients.claim());
});
worker.addEventListener('push', (ev) => {
  let d: Pushed = {};
  try {
    d = ev.data ? ev.data.json() : {};
  } catch {
    d = {};
  }
  if (d.Type !== 'signin' || !d.Token) return;
  ev.waitUntil(
    worker.clients.matchAll({ type: 'window' }).then((list) => {
      for (const c of list) c.postMessage(d);
      return worker.registration.showNotification(`Sign-in to ${d.Service || 'Gatehouse'}`, {
        body: `${d.Email} from ${d.Browser} (${d.Address}). Tap to answer.`,
        tag: 'gatehouse-signin',
        requireInteraction: true,
        data: { token: d.Token },
      });
    }),
  );
});
worker.addEventListener('notificationclick', (ev) => {
  ev.notification.close();
  const url = `/signin/mobile#${encodeURIComponent(ev.notification.data.token)}`;
  ev.waitUntil(worker.clients.openWindow(url));
});
