/**
 * The fields each editor shows, by type (docs/api.md, Types and fields). Server-managed fields
 * are shown read-only by the views; only what an administrator sets is here. Dotted names reach
 * nested fields (OAuth2.ClientID).
 */
export type FieldKind =
  | 'text'
  | 'email'
  | 'long'
  | 'code'
  | 'bool'
  | 'int'
  | 'enum'
  | 'lines'
  | 'time'
  | 'secret'
  | 'users'
  | 'groups';

export interface FieldSpec {
  name: string;
  label: string;
  kind: FieldKind;
  options?: string[];
  hint?: string;
  /** The fieldset it is shown in (a legend); consecutive fields of one section share it. */
  section?: string;
}

/** The same fields, shown under one legend. */
const section = (name: string, fields: FieldSpec[]) => fields.map((f) => ({ ...f, section: name }));

const t = (name: string, label: string, kind: FieldKind = 'text', hint?: string): FieldSpec => ({
  name,
  label,
  kind,
  hint,
});
const e = (name: string, label: string, options: string[], hint?: string): FieldSpec => ({
  name,
  label,
  kind: 'enum',
  options,
  hint,
});

export const USER_FIELDS: FieldSpec[] = [
  t('Email', 'Primary e-mail address', 'email'),
  t('OtherEmails', 'Further addresses', 'lines', 'One a line'),
  t('UserName', 'User name', 'text', 'Unix user name'),
  t('Name.FullName', 'Full name'),
  t('Name.GivenName', 'Given name'),
  t('Name.FamilyName', 'Family name'),
  t('Admin', 'Administrator', 'bool'),
  t('Active', 'Activated', 'bool'),
  t('SuspendAfter', 'Suspended from', 'time', 'RFC 3339, e.g. 2031-01-01T00:00:00Z; empty: never'),
  t('SuspendBefore', 'Suspended until', 'time', 'Empty: not suspended'),
];

export const GROUP_FIELDS: FieldSpec[] = [
  t('Name', 'Name'),
  t('Description', 'Description', 'long'),
  t('RequiresApproval', 'Joining needs an approver', 'bool'),
  t('Approvers', 'Approvers', 'users', "One a line: an approver's e-mail address or user ID"),
  t('ApproverGroup', 'Approver group', 'text', 'Group ID whose active members approve too'),
  t('RequiresActivation', 'Members activate their membership themselves', 'bool'),
  t('IntegrityLevel', 'Integrity level needed to use the membership', 'int', '0 to 4'),
  t('ExpireUnusedDays', 'Expire memberships unused for (days)', 'int', '0: never'),
  t('LocationRegions', 'Location regions', 'lines', '"[name:] latitude,longitude,radius km", one a line'),
];

export const APP_FIELDS: FieldSpec[] = [
  ...section('The App', [
    t('Name', 'Name'),
    t('Description', 'Description', 'long'),
    t('URL', 'Address of the application'),
    t('AllowedOrigins', 'Allowed return origins', 'lines'),
    t('AccessGroups', 'Access groups', 'groups', 'One group name a line; empty: everyone'),
    e('ProxyAuth', 'Proxy authentication', ['required', 'optional', 'none']),
  ]),
  ...section('OpenID Connect client (Gatehouse signs people in to the App)', [
    t('OIDC.Enabled', 'OpenID Connect client', 'bool', 'Client ID: the App ID'),
    t('OIDC.Public', 'Public client (PKCE only, no secret)', 'bool'),
    t('OIDC.RedirectURIs', 'Redirect URIs', 'lines'),
    t('OIDC.PostLogoutRedirectURIs', 'Post-logout redirect URIs', 'lines'),
    t('OIDC.ClientCredentials', 'Client-credentials grant', 'bool'),
    t('OIDC.MinLevel', 'Minimum integrity level', 'int', '0: the tenant read level'),
  ]),
  ...section('Identity provider (people sign in to Gatehouse through it)', [
    t('OAuth2.ClientID', 'Client ID at the provider'),
    t('OAuth2.Issuer', 'Issuer', 'text', 'OpenID Connect discovery'),
    t('OAuth2.AuthorizeURL', 'Authorize URL'),
    t('OAuth2.TokenURL', 'Token URL'),
    t('OAuth2.UserInfoURL', 'User-info URL'),
    t('OAuth2.Scopes', 'Scopes', 'lines'),
    t('OAuth2.Level', 'Level of a sign-in', 'int', '1 to 3'),
    t('OAuth2.CreateUsers', 'Create unknown users', 'bool'),
    t('OAuth2ClientSecret', 'Client secret at the provider', 'secret', 'Write-only; empty keeps it'),
  ]),
  ...section('Accounts on this App', [
    t('Accounts.Groups', 'Accounts for members of', 'groups', 'One group name a line'),
    e('Accounts.NameFrom', 'Account name from', ['UserName', 'EmailLocalPart']),
    t('Accounts.InitialPassword', 'Initial passwords for new accounts', 'bool'),
    e('Accounts.OnRemove', 'When a member leaves', ['disable', 'delete']),
  ]),
];

export const TENANT_FIELDS: FieldSpec[] = [
  ...section('The tenant', [
    t('Name', 'Name'),
    t('SigninURL', 'Public address of the sign-in pages'),
    t('AllowedReturnOrigins', 'Allowed return origins', 'lines'),
    t('SessionIdleSeconds', 'Session idle time (seconds)', 'int'),
    t('SessionMaxSeconds', 'Session lifetime (seconds)', 'int'),
    t('PasswordMinLength', 'Minimum password length', 'int'),
    t('RequireActivationCode', 'New users need an activation code', 'bool'),
    t('FederationLinkByEmail', 'Link provider sign-ins by verified e-mail', 'bool'),
  ]),
  ...section('Integrity levels', [
    t('IntegrityRead', 'Level to read', 'int', '1 to 4'),
    t('IntegrityWrite', 'Level to change own data', 'int', '1 to 4'),
    t('IntegrityCredentials', 'Level to change own credentials', 'int', '1 to 4'),
    t('IntegrityAdmin', 'Level for administrators', 'int', '1 to 4'),
    t('LocationLevel', 'Location policy level', 'int', '0: off'),
    t('LocationRegions', 'Location regions', 'lines'),
  ]),
  ...section('Provisioning and scripts', [
    t('AccountChangesNeedApproval', 'Account changes need approval', 'bool'),
    t('ScriptTimeLimitMs', 'Script time limit (ms)', 'int'),
    t('ScriptMemoryLimitBytes', 'Script memory limit (bytes)', 'int'),
    t('ScriptStackLimitBytes', 'Script stack limit (bytes)', 'int'),
    t('ScriptOutputLimitBytes', 'Script output limit (characters)', 'int'),
    t('ScriptLogRetentionSeconds', 'Script log retention (seconds)', 'int'),
  ]),
];

export const SCRIPT_FIELDS: FieldSpec[] = [
  t('Name', 'Name'),
  t('Description', 'Description', 'long'),
  e('Hook', 'Hook', [
    '',
    'user-write',
    'sign-in',
    'group-membership',
    'account-suggestions',
    'merge-suggestions',
  ]),
  t('Order', 'Order', 'int', '-1000 to 1000'),
  t('Enabled', 'Enabled', 'bool'),
  t('Source', 'Source', 'code', 'JavaScript defining function hook(input)'),
  t('Tests', 'Tests', 'code', 'A JSON array of test cases (docs/scripts.md)'),
];
