import type { FastifyRequest } from 'fastify';
import type { Json } from '../../core/routeschema.js';
import type { Doc } from '../../schema/fields.js';
import type { StoredObject } from '../../store/objects.js';
import type { ServiceContext } from '../../store/service.js';
import type { Session } from '../session/sessions.js';
import type { CredentialChange, CredentialOp } from './stepup.js';

/**
 * What a factor declares (./factor.ts), as data: its steps, which the one flow (./flow.ts) serves,
 * and the description of its forms, which the pages draw (src/web). Types only.
 */

export interface Identified {
  session: Session;
  user: StoredObject;
  secret: Doc;
}

export type FieldInput = 'secret' | 'secret-digits' | 'digits' | 'text';

/** One input of a factor's form: a field of its step's body, and how the pages draw it. */
export interface FieldSpec {
  /** The body field. */
  name: string;
  /** The visible label. */
  label: string;
  /**
   * What the browser offers: a secret (hidden as typed), a secret of digits (a PIN), digits
   * shown as typed (a code from an app), or text.
   */
  input: FieldInput;
  /** Longest value accepted (characters). */
  maxLength: number;
  /** The HTML autocomplete token (current-password, one-time-code, off). */
  autocomplete?: string;
  /** A line under the input. */
  hint?: string;
}

/** A sign-in step that proves the factor from what the person types. */
export interface ProveStep {
  /** For the API document. */
  summary: string;
  /** In "the <what> is not correct". */
  what: string;
  fields: readonly FieldSpec[];
  /**
   * Does this answer prove the factor for the user being signed in? Called under regulation:
   * the attempt is charged already, and a true answer clears this factor's counter only.
   */
  check(ctx: ServiceContext, who: Identified, values: Readonly<Record<string, string>>): Promise<boolean>;
  /** Recorded on the session with the proof (the activation code's ActivationCode). */
  sessionData?: Partial<Session['data']>;
}

/** A change of the factor's set-up: set, generate, confirm or remove. */
export interface EnrollStep {
  method: 'POST' | 'PUT' | 'DELETE';
  /** After /auth/enroll/<name>: '' or '/confirm'. */
  path?: string;
  /** A removal ends the user's other sessions; a first set-up may come from an invitation. */
  op: CredentialOp;
  summary: string;
  /** The JSON body's properties, all strings, and which are required (validated by the schema). */
  body?: { properties: Record<string, Json>; required: readonly string[]; form?: boolean };
  /** The 200 answer's properties (none: 204). */
  answer?: Record<string, Json>;
  /**
   * Stores the change for change.userId; what it returns is the 200 answer. It may prove a code
   * first with `regulated` (a confirmation).
   */
  write(
    ctx: ServiceContext,
    change: CredentialChange,
    body: Readonly<Record<string, string>>,
    req: FastifyRequest,
  ): Promise<Record<string, unknown> | undefined>;
  /**
   * False for a step that only prepares (a pending secret to confirm): the change's
   * consequences wait for the step that completes it.
   */
  completes?: boolean;
}

/** How people read the factor's name (every factor a session can record has words). */
export interface FactorWords {
  /** A choice: "Use <label> instead". */
  label: string;
  /** What was proven: "You proved who you are with <proof>". */
  proof: string;
}

/**
 * The browser parts the pages have for factors that are not typed into fields (src/web/assets):
 * a security key, a link by e-mail, a code by phone, a push to the phone app, an app's QR code,
 * a list of backup codes. A factor made of fields needs none: the pages draw its fields.
 */
export type ClientPart = 'webauthn' | 'otp' | 'pstn' | 'mobile' | 'totp' | 'backup';

/** How the sign-in page offers the factor among the ways to prove who one is. */
export interface SignInForm {
  /** Where it comes among the choices (lower first). */
  rank?: number;
  /** The form's button. */
  submit?: string;
  /** A line under the fields. */
  hint?: string;
  /** Drawn by a browser part instead of from the prove step's fields. */
  client?: Extract<ClientPart, 'webauthn' | 'otp' | 'pstn' | 'mobile'>;
  /** Offered as that factor's choice (u2f_uv and u2f_up prove through the u2f choice). */
  choiceOf?: string;
}

/** How the security settings page offers to set the factor up. */
export interface SettingsForm {
  title: string;
  /** Where its card comes (lower first). */
  rank: number;
  intro?: string;
  /**
   * A secret chosen by the person, typed twice, sent as this field of the PUT enroll step
   * (password, PIN). Its input is drawn from `input`, its rule checked by the server.
   */
  secret?: {
    field: string;
    label: string;
    input: FieldInput;
    pattern?: string;
    /** Typed twice: the label of the second input. */
    repeat?: string;
    /** The user's field that says it is set up (HavePassword); without one, no status is shown. */
    flag?: string;
    submit: string;
    /** The button once it is set up. */
    change: string;
    /** Said when saved. */
    saved: string;
  };
  /** Drawn by a browser part (an app to scan, keys to list, codes to show). */
  client?: ClientPart;
}
