/**
 * The vouching pages (src/web/vouch.ts, docs/signin.md "Vouching"): the requester's page, one's
 * own reference video, and the voucher's page. Everything they show comes from the API.
 */
import './vouch.css';
import { type ApiResult, api } from './api.js';
import { $, alertBox, show } from './dom.js';
import { recorderUI } from './recorder.js';

const body = document.body;

/** The vouch calls send forms (empty values left out) or nothing. */
const call = <T = { Message?: string; Intent?: string; Field?: string }>(
  method: string,
  path: string,
  form?: Record<string, string>,
) => api<T>(method, path, form ? { form } : {});

const message = (r: ApiResult<unknown>) =>
  (r.data as { Message?: string } | null)?.Message || `The service answered ${r.status}.`;

interface Person {
  Email: string;
  FullName?: string;
}
const names = (list: Person[]) =>
  list.map((v) => (v.FullName ? `${v.FullName} (${v.Email})` : v.Email)).join(', ');

/** A vouch request, as the API answers it (docs/signin.md). */
interface VouchRequest {
  ID: string;
  State: string;
  ExpireTime: string;
  MagicWords: string[];
  Vouchers: Person[];
  VouchURL: string;
  User: Person;
  Reason?: string;
  LevelName: string;
  Level: number;
  HaveVideo?: boolean;
  VideoID?: string;
}

const ENDINGS: Record<string, string> = {
  rejected: 'Your colleague declined. Ask an administrator for help.',
  expired: 'Nobody answered in time. You can ask again.',
};

function requestPage(): void {
  const returnUrl = body.getAttribute('data-return') || '';
  const intent = body.getAttribute('data-intent') || '';
  let request: VouchRequest | null = null;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const finish = (state: string) => {
    cam.close();
    alertBox('', '');
    show($('v-wait'), false);
    show($('v-record'), false);
    show($('v-done'), true);
    const ok = state === 'approved';
    $('h-done').textContent = ok ? 'Your colleague vouched for you' : 'The request ended';
    $('v-done-text').textContent = ok
      ? 'You are signed in. Set up a new authenticator now, so you do not need a vouch next time.'
      : (ENDINGS[state] ?? 'You cancelled the request.');
    $('v-continue').setAttribute('href', ok ? returnUrl || '/signin/enroll' : '/signin/vouch');
    $('v-continue').textContent = ok ? 'Continue' : 'Start again';
  };
  const poll = () => {
    if (!request) return;
    call<VouchRequest>('GET', `/auth/vouch/${encodeURIComponent(request.ID)}`).then(
      (r) => {
        if (r.status !== 200 || !r.data) {
          alertBox('error', message(r));
          return;
        }
        $('v-state').textContent = r.data.State;
        if (r.data.State !== 'pending') {
          finish(r.data.State);
          return;
        }
        if (Date.parse(r.data.ExpireTime) + 5000 > Date.now()) timer = setTimeout(poll, 2000);
      },
      () => {
        timer = setTimeout(poll, 5000);
      },
    );
  };
  const upload = (blob: Blob) => {
    fetch(`/auth/vouch/${encodeURIComponent(request?.ID ?? '')}/video`, {
      method: 'POST',
      body: blob,
      credentials: 'same-origin',
      headers: { 'X-Requested-With': 'gatehouse', 'Content-Type': 'video/webm' },
    }).then((res) => {
      if (res.status !== 204) {
        return res.json().then(
          (j: { Message?: string }) => alertBox('error', j.Message || 'The video was refused.'),
          () => alertBox('error', `The video was refused (${res.status}).`),
        );
      }
      cam.close();
      show($('v-record'), false);
      show($('v-wait'), true);
      alertBox('ok', 'Video sent. Ask a colleague to open the link below.');
      poll();
      return undefined;
    });
  };
  const cam = recorderUI('v', upload);
  $('v-ask').addEventListener('submit', (ev) => {
    ev.preventDefault();
    call<VouchRequest & { Field?: string }>('POST', '/auth/vouch', {
      intent,
      reason: $<HTMLInputElement>('v-reason').value,
    }).then((r) => {
      if (r.status === 400 && r.data && r.data.Field === 'email') {
        location.href = `/signin?return=${encodeURIComponent('/signin/vouch')}`;
        return;
      }
      if (r.status !== 200 || !r.data) {
        alertBox('error', message(r));
        return;
      }
      request = r.data;
      alertBox('', '');
      $('v-words').textContent = request.MagicWords.join(' · ');
      $('v-vouchers').textContent = names(request.Vouchers);
      const link = location.origin + request.VouchURL;
      $('v-link').textContent = link;
      $('v-link').setAttribute('href', link);
      $('v-expires').textContent = new Date(request.ExpireTime).toLocaleTimeString();
      show($('v-ask').parentNode as HTMLElement, false);
      show($('v-record'), true);
      cam.open();
    });
  });
  $('v-cancel').addEventListener('click', () => {
    if (!request) return;
    clearTimeout(timer);
    call('DELETE', `/auth/vouch/${encodeURIComponent(request.ID)}`).then((r) => {
      if (r.status !== 200) {
        alertBox('error', message(r));
        return;
      }
      finish('cancelled');
    });
  });
}

function referencePage(): void {
  const words = (body.getAttribute('data-words') || '').split(',');
  const self = '/signin/vouch/reference';
  let userId = '';
  const stepUp = (r: { Intent?: string }) => {
    location.href = `/signin?intent=${encodeURIComponent(r.Intent ?? '')}&return=${encodeURIComponent(self)}`;
  };
  const current = () => {
    const url = `/users/${encodeURIComponent(userId)}/reference-video`;
    fetch(url, { method: 'HEAD', credentials: 'same-origin' }).then((res) => {
      const have = res.status === 200;
      $('f-have').textContent = have
        ? `You have a reference video (words: ${(res.headers.get('X-Magic-Words') || '').split(',').join(', ')}).`
        : 'You have no reference video yet.';
      show($('f-current'), have);
      if (have) $('f-current').setAttribute('src', `${url}?v=${Date.now()}`);
    });
  };
  const ref = recorderUI('f', (blob) => {
    fetch(`/users/${encodeURIComponent(userId)}/reference-video`, {
      method: 'PUT',
      body: blob,
      credentials: 'same-origin',
      headers: {
        'X-Requested-With': 'gatehouse',
        'Content-Type': 'video/webm',
        'X-Magic-Words': words.join(','),
      },
    }).then((res) => {
      if (res.status === 204) {
        $('f-status').textContent = '';
        alertBox('ok', 'Your reference video is saved.');
        current();
        return undefined;
      }
      return res.json().then((j: { Message?: string; Intent?: string }) => {
        if (res.status === 401 && j.Intent) {
          stepUp(j);
          return;
        }
        alertBox('error', j.Message || 'The video was refused.');
      });
    });
  });
  call<{ ID: string; Intent?: string }>('GET', '/users/me').then((r) => {
    if (r.status === 401 && r.data && r.data.Intent) {
      stepUp(r.data);
      return;
    }
    if (r.status !== 200 || !r.data) {
      alertBox('error', message(r));
      return;
    }
    userId = r.data.ID;
    current();
    ref.open();
  });
}

function render(id: string, v: VouchRequest): void {
  $('d-lead').textContent =
    v.State === 'pending'
      ? 'Check that this is really your colleague before you approve.'
      : `This request is ${v.State}.`;
  $('d-who').textContent = `${v.User.FullName ? `${v.User.FullName} ` : ''}<${v.User.Email}>`;
  $('d-reason').textContent = v.Reason || '—';
  $('d-words').textContent = v.MagicWords.join(' · ');
  $('d-level').textContent = `${v.LevelName} (level ${v.Level})`;
  $('d-state').textContent = v.State;
  show($('d-facts'), true);
  const pending = v.State === 'pending';
  show($('d-videos'), pending);
  show($('d-actions'), pending && !!v.HaveVideo);
  if (pending) {
    $('d-ref').setAttribute('src', `/auth/vouch/${encodeURIComponent(id)}/reference-video`);
    show($('d-novideo'), !v.HaveVideo);
    show($('d-new'), !!v.HaveVideo);
    if (v.HaveVideo) $('d-new').setAttribute('src', `/auth/vouch/${encodeURIComponent(id)}/video`);
  }
}

function decidePage(): void {
  const id = body.getAttribute('data-id') || '';
  const here = `/signin/vouch/${encodeURIComponent(id)}`;
  let current: VouchRequest | null = null;
  const decide = (what: 'approve' | 'decline') => {
    call<VouchRequest & { Intent?: string }>(
      'POST',
      `/auth/vouch/${encodeURIComponent(id)}/${what}`,
      what === 'approve' ? { video: current?.VideoID ?? '' } : {},
    ).then((r) => {
      if (r.status === 401 && r.data && r.data.Intent) {
        location.href = `/signin?intent=${encodeURIComponent(r.data.Intent)}&return=${encodeURIComponent(here)}`;
        return;
      }
      if (r.status !== 200 || !r.data) {
        alertBox('error', message(r));
        return;
      }
      current = r.data;
      render(id, r.data);
      alertBox(
        'ok',
        r.data.State === 'approved'
          ? `Thank you: you vouched for ${r.data.User.Email}.`
          : 'You declined the request.',
      );
    });
  };
  call<VouchRequest>('GET', `/auth/vouch/${encodeURIComponent(id)}`).then((r) => {
    if (r.status !== 200 || !r.data) {
      $('d-lead').textContent = 'This request does not exist, has ended, or does not name you. ';
      const a = document.createElement('a');
      a.href = `/signin?return=${encodeURIComponent(here)}`;
      a.textContent = 'Sign in as the colleague it names';
      $('d-lead').appendChild(a);
      return;
    }
    current = r.data;
    render(id, r.data);
  });
  $('d-approve').addEventListener('click', () => decide('approve'));
  $('d-decline').addEventListener('click', () => decide('decline'));
}

const page = body.getAttribute('data-page');
if (page === 'vouch-request') requestPage();
if (page === 'vouch-reference') referencePage();
if (page === 'vouch-decide') decidePage();
