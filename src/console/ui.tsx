/**
 * Small parts every view uses: the router (paths under /console, history API), links, the
 * confirmation dialog (native <dialog>: focus kept inside, Escape cancels), status messages
 * announced to screen readers, and names for IDs.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Doc } from './api.js';

// ---- routing -------------------------------------------------------------------------------

// module-state: the views following the address bar of this page (one console per page).
const listeners = new Set<() => void>();
// module-state: whether the console has moved from the page it was opened on (focus follows moves only).
let moved = false;
export function navigate(path: string) {
  if (path === location.pathname + location.search) return;
  moved = true;
  history.pushState(null, '', path);
  for (const l of listeners) l();
}
addEventListener('popstate', () => {
  moved = true;
  for (const l of listeners) l();
});

/** The current path, kept current. */
export function usePath(): string {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const l = () => setPath(location.pathname);
    listeners.add(l);
    return () => listeners.delete(l);
  }, []);
  return path;
}

interface LinkProps {
  href: string;
  children: ComponentChildren;
  current?: boolean;
  class?: string;
}

/** A real link (open in a new tab works), followed in place on a plain click. */
export function Link({ href, children, current, class: cls }: LinkProps) {
  return (
    <a
      href={href}
      class={cls}
      aria-current={current ? 'page' : undefined}
      onClick={(e) => {
        if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(href);
      }}
    >
      {children}
    </a>
  );
}

// ---- dialogs -------------------------------------------------------------------------------

interface DialogProps {
  title: string;
  onClose: () => void;
  children: ComponentChildren;
}

/** A modal dialog, open while rendered; Escape and "Cancel" close it. */
export function Modal({ title, onClose, children }: DialogProps) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    // Back to where the keyboard was when the dialog opened (the dialog leaves the page when closed).
    const opener = document.activeElement as HTMLElement | null;
    if (d && !d.open) d.showModal();
    return () => {
      d?.close();
      if (opener?.isConnected) opener.focus();
    };
  }, []);
  const id = `dlg-${title.replace(/\W+/g, '-').toLowerCase()}`;
  return (
    <dialog
      ref={ref}
      aria-labelledby={id}
      onCancel={(e) => {
        e.preventDefault();
        onClose();
      }}
    >
      <h2 id={id}>{title}</h2>
      {children}
    </dialog>
  );
}

export interface ConfirmRequest {
  title: string;
  /** What will change, in words: the object and what happens to it. */
  body: ComponentChildren;
  /** The button's words, naming the action ("Disable ada@example.com"). */
  action: string;
  danger?: boolean;
}

type ConfirmState = ConfirmRequest & { resolve: (ok: boolean) => void };
// module-state: one confirmation at a time per console page; ConfirmHost draws it.
let showConfirm: ((c: ConfirmState | undefined) => void) | undefined;

/** Asks before a destructive action; resolves true when the administrator confirms. */
export function confirmAction(req: ConfirmRequest): Promise<boolean> {
  return new Promise((resolve) => {
    if (!showConfirm) return resolve(false);
    showConfirm({ ...req, resolve });
  });
}

export function ConfirmHost() {
  const [c, setC] = useState<ConfirmState>();
  useEffect(() => {
    showConfirm = setC;
    return () => {
      showConfirm = undefined;
    };
  }, []);
  if (!c) return null;
  const done = (ok: boolean) => {
    setC(undefined);
    c.resolve(ok);
  };
  return (
    <Modal title={c.title} onClose={() => done(false)}>
      <div class="confirm-body">{c.body}</div>
      <div class="actions confirm-actions">
        <button type="button" class="secondary" onClick={() => done(false)}>
          Cancel
        </button>
        <button type="button" class={c.danger ? 'danger' : ''} onClick={() => done(true)}>
          {c.action}
        </button>
      </div>
    </Modal>
  );
}

// ---- messages ------------------------------------------------------------------------------

export interface Note {
  kind: 'ok' | 'error' | 'warn';
  text: ComponentChildren;
}

/** A message box: errors are alerts (read out at once), the rest polite status. */
export function Notice({ note }: { note: Note | undefined }) {
  if (!note) return <div role="status" class="sr-only" />;
  return (
    <div class={`alert ${note.kind}`} role={note.kind === 'error' ? 'alert' : 'status'}>
      {note.text}
    </div>
  );
}

// ---- names ---------------------------------------------------------------------------------

export const userName = (u: Doc | undefined) =>
  u ? String(u.Email || u.UserName || u.Name?.FullName || u.ID) : '';

/** A time as the administrator reads it; '' for the API's zero time. */
export function when(t: unknown): string {
  if (typeof t !== 'string' || t.startsWith('0001-')) return '';
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? t : d.toLocaleString();
}

export function Badge({ on, bad, children }: { on?: boolean; bad?: boolean; children: ComponentChildren }) {
  return <span class={bad ? 'badge bad' : on ? 'badge on' : 'badge'}>{children}</span>;
}

/**
 * A view's heading, focused when the console moves to the view so keyboard and screen-reader users
 * land there (not on the page's first load, where Tab starts at the skip link as on any page).
 */
export function Heading({ children }: { children: ComponentChildren }) {
  const ref = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    if (moved) ref.current?.focus({ preventScroll: true });
  }, []);
  return (
    <h1 ref={ref} tabIndex={-1}>
      {children}
    </h1>
  );
}

/** Re-runs `load` when its inputs change; gives its result, its error and a reload. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): [T | undefined, unknown, () => void] {
  const [value, setValue] = useState<T>();
  const [error, setError] = useState<unknown>();
  const [n, setN] = useState(0);
  useEffect(() => {
    let live = true;
    load().then(
      (v) => {
        if (!live) return;
        setValue(v);
        setError(undefined);
      },
      (e) => {
        if (live) setError(e);
      },
    );
    return () => {
      live = false;
    };
  }, [...deps, n]);
  return [value, error, () => setN((x) => x + 1)];
}
