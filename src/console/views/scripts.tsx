/** Scripts: the list, a new script; one script: the editor, its test runner and its ScriptLogs. */
import { useRef, useState } from 'preact/hooks';
import { call, type Doc, explain, seg } from '../api.js';
import { ObjectEditor } from '../editor.js';
import { SCRIPT_FIELDS } from '../fields.js';
import { openCreated, useLive } from '../live.js';
import { Badge, confirmAction, Heading, Link, type Note, Notice, navigate, when } from '../ui.js';
import { deleteObject } from './user.js';

export function ScriptsView() {
  const scripts = useLive('Script');
  const [note, setNote] = useState<Note>();
  const create = async () => {
    try {
      const r = await call('POST', '/scripts', {
        json: { Name: 'New script', Source: 'function hook(input) {\n  return {};\n}\n', Tests: '[]' },
      });
      await openCreated('Script', 'scripts', r);
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  return (
    <>
      <div class="head">
        <Heading>Scripts</Heading>
        <button type="button" onClick={create}>
          New script
        </button>
      </div>
      <Notice note={note} />
      <section class="card">
        {scripts.ready && scripts.items.length === 0 && <p class="muted">No script yet.</p>}
        <ul class="plain">
          {scripts.items.map((s) => (
            <li key={s.ID}>
              <span>
                <Link href={`/console/scripts/${seg(s.ID)}`}>{String(s.Name || s.ID)}</Link>{' '}
                <span class="muted">{s.Hook || 'no hook'}</span>
              </span>
              <Badge on={s.Enabled}>{s.Enabled ? 'enabled' : 'off'}</Badge>
            </li>
          ))}
        </ul>
      </section>
    </>
  );
}

function LogLine({ l }: { l: Doc }) {
  const failed = l.Test && !l.Passed;
  return (
    <li class="log">
      <div>
        <strong>{String(l.Test || l.Hook || 'run')}</strong>{' '}
        {l.Test ? (
          <Badge on={l.Passed} bad={!l.Passed}>
            {l.Passed ? 'passed' : 'failed'}
          </Badge>
        ) : null}{' '}
        <span class="muted">
          {when(l.Time)} · {Number(l.DurationMs).toFixed(1)} ms
        </span>
      </div>
      {l.Applied && <div class={failed ? 'bad' : 'muted'}>{l.Applied}</div>}
      {l.Error && <div class="bad">{l.Error}</div>}
      {(l.Console ?? []).length > 0 && <pre class="out">{(l.Console as string[]).join('\n')}</pre>}
      {l.Result && (
        <div>
          Result <code>{l.Result}</code>
          {l.Expected && !l.Passed ? (
            <>
              , expected <code>{l.Expected}</code>
            </>
          ) : null}
        </div>
      )}
    </li>
  );
}

export function ScriptView({ id }: { id: string }) {
  const scripts = useLive('Script');
  const logs = useLive('ScriptLog')
    .items.filter((l) => l.ScriptID === id)
    .sort((a, b) => String(b.Time).localeCompare(String(a.Time)))
    .slice(0, 50);
  const draft = useRef<(() => Doc) | undefined>(undefined);
  const [run, setRun] = useState<{ status: number; lines: Doc[] }>();
  const [note, setNote] = useState<Note>();
  const s = scripts.byId.get(id);
  if (!s) return <p class="muted">{scripts.ready ? 'No such script.' : 'Loading…'}</p>;
  const test = async () => {
    try {
      const body = draft.current?.() ?? s;
      const r = await call('POST', '/scripts/test', { json: body, accept: [422, 500] });
      const lines = r.text
        .split('\n')
        .filter((x) => x.trim().startsWith('{'))
        .map((x) => JSON.parse(x))
        .map((x: Doc) => (x.Item ? x.Item : x));
      setRun({ status: r.status, lines });
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  const remove = async () => {
    const ok = await confirmAction({
      title: 'Delete script',
      body: (
        <p>
          The script {s.Name} is deleted{s.Enabled ? ` and no longer runs on ${s.Hook}` : ''}.
        </p>
      ),
      action: `Delete ${s.Name}`,
      danger: true,
    });
    if (!ok) return;
    try {
      await deleteObject(`/scripts/${seg(id)}`);
      navigate('/console/scripts');
    } catch (err) {
      setNote({ kind: 'error', text: explain(err) });
    }
  };
  const verdict: Record<number, string> = {
    204: 'All tests pass.',
    200: 'All tests pass.',
    422: 'A test failed.',
    500: 'The script does not compile.',
  };
  return (
    <>
      <p class="crumbs">
        <Link href="/console/scripts">All scripts</Link>
      </p>
      <div class="head">
        <Heading>{String(s.Name || id)}</Heading>
        <button type="button" class="danger" onClick={remove}>
          Delete script…
        </button>
      </div>
      <Notice note={note} />
      <section class="card">
        <ObjectEditor
          path={`/scripts/${seg(id)}`}
          fields={SCRIPT_FIELDS}
          current={s}
          onDraft={(b) => (draft.current = b)}
          actions={
            <button type="button" class="secondary" onClick={test}>
              Run the tests
            </button>
          }
        />
        {run && (
          <div class="testrun" role="status">
            <p class={run.status >= 400 ? 'bad' : 'good'}>{verdict[run.status] ?? `Answer ${run.status}`}</p>
            <ul class="plain logs">
              {run.lines.map((l, i) => (
                <LogLine key={String(i)} l={l} />
              ))}
            </ul>
          </div>
        )}
      </section>
      <section class="card" aria-labelledby="logs-h">
        <h2 id="logs-h">Script logs</h2>
        {logs.length === 0 && <p class="muted">No run logged.</p>}
        <ul class="plain logs">
          {logs.map((l) => (
            <LogLine key={l.ID} l={l} />
          ))}
        </ul>
      </section>
    </>
  );
}
