/**
 * Every error the API can answer with, defined once: its HTTP status and the stable
 * X-Error-Code value. Codes are human-readable phrases, in the style of the spec's
 * "Account Missing". Never rename a code: clients match on it.
 */
export const ErrorCodes = {
  BadRequest: { status: 400, code: 'Bad Request' },
  InvalidField: { status: 400, code: 'Invalid Field' },
  UnknownField: { status: 400, code: 'Unknown Field' },
  InvalidJSON: { status: 400, code: 'Invalid JSON' },
  InvalidFilter: { status: 400, code: 'Invalid Filter' },
  InvalidOrder: { status: 400, code: 'Invalid Order' },
  InvalidCursor: { status: 400, code: 'Invalid Cursor' },
  InvalidLimit: { status: 400, code: 'Invalid Limit' },
  UnsupportedVersion: { status: 400, code: 'Unsupported API Version' },
  AccountMissing: { status: 400, code: 'Account Missing' },
  InvalidIntent: { status: 400, code: 'Invalid Intent' },
  Unauthenticated: { status: 401, code: 'Unauthenticated' },
  InsufficientIntegrity: { status: 401, code: 'Insufficient Integrity' },
  Forbidden: { status: 403, code: 'Forbidden' },
  IncorrectCredential: { status: 403, code: 'Incorrect Credential' },
  ActivationCodeRequired: { status: 403, code: 'Activation Code Required' },
  CsrfCheckFailed: { status: 403, code: 'CSRF Check Failed' },
  /**
   * The proxy's back channel: the App is closed to this user (App.AccessGroups, its sign-in
   * level or location). The proxy tells it from a refused credential by this code
   * (src/wire/proxy.ts APP_REFUSED_CODE).
   */
  AppRefused: { status: 403, code: 'App Refused' },
  NotFound: { status: 404, code: 'Not Found' },
  MethodNotAllowed: { status: 405, code: 'Method Not Allowed' },
  NotAcceptable: { status: 406, code: 'Not Acceptable' },
  /** A one-time sign-in URL (first start, `gatehouse recover`) that was used already or ran out. */
  LinkExpired: { status: 410, code: 'Link Expired' },
  Conflict: { status: 409, code: 'Conflict' },
  /** A membership operation not allowed from the membership's current state (docs/groups.md). */
  InvalidTransition: { status: 409, code: 'Invalid Transition' },
  SessionConflict: { status: 409, code: 'Session Conflict' },
  /** The change would leave no active administrator (Admin, Active, not Disabled): docs/security.md. */
  LastAdministrator: { status: 409, code: 'Last Administrator' },
  PreconditionFailed: { status: 412, code: 'Precondition Failed' },
  PayloadTooLarge: { status: 413, code: 'Payload Too Large' },
  UnsupportedMediaType: { status: 415, code: 'Unsupported Media Type' },
  UpgradeRequired: { status: 426, code: 'Upgrade Required' },
  /** POST /auth/pstn/:id/start: the PSTN device's number has not been verified yet. */
  DeviceNotVerified: { status: 422, code: 'Device Not Verified' },
  PreconditionRequired: { status: 428, code: 'Precondition Required' },
  TooManyRequests: { status: 429, code: 'Too Many Requests' },
  Internal: { status: 500, code: 'Internal Error' },
  /** POST /scripts/test: the script does not compile (docs/scripts.md). */
  ScriptCompileFailed: { status: 500, code: 'Script Compile Failed' },
  /** POST /scripts/test: a test case failed. */
  ScriptTestsFailed: { status: 422, code: 'Script Tests Failed' },
  /** A user-write script refused the change; the message is the script's reason. */
  ScriptRejected: { status: 422, code: 'Script Rejected' },
  /** A sign-in script refused the sign-in; the message is the script's reason. */
  ScriptDenied: { status: 403, code: 'Script Denied' },
  Unavailable: { status: 503, code: 'Service Unavailable' },
  /** Sign-in through another provider refused: unknown or used state, another session, a bad token. */
  FederationFailed: { status: 400, code: 'Federation Failed' },
  /** The provider identity is linked to no user, and none may be linked or created (docs/federation.md). */
  AccountNotLinked: { status: 403, code: 'Account Not Linked' },
  /** The upstream identity provider could not be reached or answered nonsense. */
  ProviderUnavailable: { status: 502, code: 'Provider Unavailable' },
} as const;

export type ErrorKind = keyof typeof ErrorCodes;

/** The JSON body of every error response. */
export interface ErrorBody {
  Status: number;
  Code: string;
  Message: string;
  /** The request field, header or parameter at fault, when there is one. */
  Field?: string;
  RequestID?: string;
}

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly field: string | undefined;
  readonly headers: Record<string, string>;
  /** The policy rule that refused the request (src/policy), recorded in the audit trail. */
  readonly rule: string | undefined;

  constructor(
    kind: ErrorKind,
    message: string,
    opts: { field?: string; headers?: Record<string, string>; rule?: string } = {},
  ) {
    super(message);
    this.name = 'ApiError';
    this.status = ErrorCodes[kind].status;
    this.code = ErrorCodes[kind].code;
    this.field = opts.field;
    this.headers = opts.headers ?? {};
    this.rule = opts.rule;
  }

  body(requestId?: string): ErrorBody {
    const body: ErrorBody = { Status: this.status, Code: this.code, Message: this.message };
    if (this.field !== undefined) body.Field = this.field;
    if (requestId !== undefined) body.RequestID = requestId;
    return body;
  }
}

export const isApiError = (e: unknown): e is ApiError => e instanceof ApiError;
