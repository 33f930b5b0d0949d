/**
 * The API's error codes of a node that cannot do it now (its store out, the cluster moving):
 * the same request may succeed later. The client throws them as `UnavailableError`; the worker
 * SDK sends again a result acked with one of them (or `internal`). Shared by both SDKs, so it
 * imports nothing.
 */
export const UNAVAILABLE_CODES: ReadonlySet<string> = new Set([
  'store_unavailable',
  'not_ready',
  'ask_timeout',
  'mailbox_full',
  'stale_epoch',
]);
