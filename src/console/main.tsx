/**
 * The admin console (docs/console.md): the page's frame (top bar, navigation, the view of the
 * current path), the step-up gate and dialog, and the confirmation host. Views live in views/.
 */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { call, type Doc, type ErrorBody, onStepUp } from './api.js';
import { live } from './live.js';
import { StepUpForm } from './stepup.js';
import { ConfirmHost, Link, Modal, navigate, usePath, userName } from './ui.js';
import { AppsView, AppView } from './views/apps.js';
import { AuditView } from './views/audit.js';
import { DirectoryView } from './views/directory.js';
import { GroupsView, GroupView } from './views/groups.js';
import { KeysView } from './views/keys.js';
import { MetricsView } from './views/metrics.js';
import { ScriptsView, ScriptView } from './views/scripts.js';
import { SettingsView } from './views/settings.js';
import { UserView } from './views/user.js';
import { UsersView } from './views/users.js';
import { WhyView } from './views/why.js';

import './console.css';

const body = document.body;
const NEED = Number(body.dataset.need ?? 3);
const TENANT = body.dataset.tenant ?? 'Gatehouse';
const ME = body.dataset.user ?? '';

const NAV: [string, string][] = [
  ['/console/users', 'Users'],
  ['/console/groups', 'Groups'],
  ['/console/apps', 'Apps'],
  ['/console/keys', 'API keys'],
  ['/console/scripts', 'Scripts'],
  ['/console/provisioning', 'Provisioning'],
  ['/console/audit', 'Audit'],
  ['/console/metrics', 'Metrics'],
  ['/console/why', 'Why'],
  ['/console/settings', 'Settings'],
];

function View({ path }: { path: string }) {
  const [, section = 'users', id] = path.replace(/\/+$/, '').split('/').slice(1);
  const key = `${section}/${id ?? ''}`;
  switch (section) {
    case 'users':
      return id ? <UserView key={key} id={id} me={ME} /> : <UsersView />;
    case 'groups':
      return id ? <GroupView key={key} id={id} /> : <GroupsView />;
    case 'apps':
      return id ? <AppView key={key} id={id} /> : <AppsView />;
    case 'keys':
      return <KeysView />;
    case 'scripts':
      return id ? <ScriptView key={key} id={id} /> : <ScriptsView />;
    case 'provisioning':
      return <DirectoryView />;
    case 'audit':
      return <AuditView />;
    case 'metrics':
      return <MetricsView />;
    case 'why':
      return <WhyView />;
    case 'settings':
      return <SettingsView />;
    default:
      return (
        <section class="card">
          <h1>Not found</h1>
          <p>The console has no page at this address.</p>
        </section>
      );
  }
}

function Console() {
  const path = usePath();
  const [ready, setReady] = useState(Number(body.dataset.level ?? 0) >= NEED);
  const [refusal, setRefusal] = useState<{ body: ErrorBody; done: (ok: boolean) => void }>();
  const [me, setMe] = useState<Doc>();
  useEffect(() => {
    onStepUp(
      (err) =>
        new Promise<boolean>((done) => {
          setRefusal({ body: err, done });
        }),
    );
    call('GET', '/users/me').then(
      (r) => setMe(r.data),
      () => undefined,
    );
  }, []);
  useEffect(() => {
    if (ready) live.start();
  }, [ready]);
  useEffect(() => {
    if (path === '/console' || path === '/console/') history.replaceState(null, '', '/console/users');
    const section = NAV.find(([href]) => path.startsWith(href));
    document.title = `${section ? section[1] : 'Console'} · Console · ${TENANT}`;
  }, [path]);
  const section = path === '/console' || path === '/console/' ? '/console/users' : path;
  return (
    <>
      <a class="skip" href="#content">
        Skip to content
      </a>
      <header class="top">
        <span class="logo" aria-hidden="true" />
        <span class="name">{TENANT}</span>
        <span class="product">Console</span>
        <nav aria-label="Account">
          <span class="muted">{userName(me)}</span>
          <a href="/signin/enroll">Security settings</a>
          <a href="/signin/signout">Sign out</a>
        </nav>
      </header>
      <div class="frame">
        <nav class="side" aria-label="Console">
          <ul>
            {NAV.map(([href, label]) => (
              <li key={href}>
                <Link href={href} current={section.startsWith(href)}>
                  {label}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <main id="content" tabIndex={-1}>
          {ready ? (
            <View path={section} />
          ) : (
            <section class="card narrow">
              <StepUpForm need={NEED} level={1} onDone={() => setReady(true)} />
            </section>
          )}
        </main>
      </div>
      {refusal && (
        <Modal
          title="Confirm it's you"
          onClose={() => {
            refusal.done(false);
            setRefusal(undefined);
          }}
        >
          <StepUpForm
            refusal={refusal.body}
            need={Number(refusal.body.RequiredLevel ?? NEED)}
            level={2}
            onDone={() => {
              refusal.done(true);
              setRefusal(undefined);
              setReady(true);
              live.restart();
            }}
          />
          <button
            type="button"
            class="secondary"
            onClick={() => {
              refusal.done(false);
              setRefusal(undefined);
            }}
          >
            Cancel
          </button>
        </Modal>
      )}
      <ConfirmHost />
    </>
  );
}

const root = document.getElementById('console');
if (root) {
  root.textContent = '';
  render(<Console />, root);
}

export { navigate };
