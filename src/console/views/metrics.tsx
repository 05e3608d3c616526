/** Metrics at a glance: the Metric objects the collector writes (docs/directory.md, Metrics). */
import { useLive } from '../live.js';
import { Heading, when } from '../ui.js';

export function MetricsView() {
  const metrics = useLive('Metric');
  const list = metrics.items.sort((a, b) => String(a.Name).localeCompare(String(b.Name)));
  return (
    <>
      <Heading>Metrics</Heading>
      {metrics.ready && list.length === 0 && (
        <p class="muted">The collector has written no figure yet (it runs every minute).</p>
      )}
      <ul class="tiles">
        {list.map((m) => (
          <li key={m.ID} class="card tile">
            <span class="value">
              {Number(m.Value).toLocaleString()}
              {m.Unit ? <span class="unit"> {m.Unit}</span> : null}
            </span>
            <span class="label">{String(m.Description || m.Name)}</span>
            <span class="muted small">
              {m.Name} · {when(m.Time)}
            </span>
          </li>
        ))}
      </ul>
    </>
  );
}
