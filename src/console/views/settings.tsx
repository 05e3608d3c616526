/** The tenant's settings (PUT /tenant with If-Match). */
import { ObjectEditor } from '../editor.js';
import { TENANT_FIELDS } from '../fields.js';
import { useLive } from '../live.js';
import { Heading } from '../ui.js';

export function SettingsView() {
  const tenant = useLive('Tenant').items[0];
  return (
    <>
      <Heading>Settings</Heading>
      <section class="card">
        <ObjectEditor path="/tenant" fields={TENANT_FIELDS} current={tenant} />
      </section>
    </>
  );
}
