import type { WebSocket } from 'ws';

// Types shared by the event hub (hub.ts), its connections (connection.ts) and their subscriptions
// (subscription.ts), in a file of their own so that none of those imports another for a type.

/** The hub's limits: DEFAULT_OPTIONS (hub.ts) holds the defaults, EventHub.configure changes them. */
export interface EventHubOptions {
  /** A ping every interval; a peer that has not answered the previous one is dropped. */
  pingIntervalMs: number;
  /** A connection whose unsent data passes this is closed with 4008 (slow consumer). */
  maxBufferedBytes: number;
  /** While sending a snapshot, wait for the buffer to fall below this before sending more. */
  snapshotHighWaterBytes: number;
  /** A snapshot that cannot make progress for this long closes the connection with 4008. */
  snapshotStallMs: number;
  /** Changes held for one subscription while its snapshot is read and sent. */
  maxPendingChanges: number;
  /** Subscriptions per connection. */
  maxSubscriptions: number;
  /**
   * Open streams per user (per key or session for credentials without a user): every stream
   * holds a socket, buffers and up to maxSubscriptions snapshots, so one user key must not open
   * them without bound.
   */
  maxStreamsPerUser: number;
  /** Safety-net poll of the change log. */
  pollIntervalMs: number;
}

/** The socket operations a connection uses (a ws WebSocket). */
export type EventSocket = Pick<
  WebSocket,
  'send' | 'close' | 'terminate' | 'ping' | 'on' | 'bufferedAmount' | 'readyState'
>;
