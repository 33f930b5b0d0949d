/** What a page of the dashboard is (src/dashboard/app.ts shows them). */

/** The URL's hash as a route: `#/tasks/019…?status=failed` → `['tasks', '019…']` and its query. */
export interface Route {
  parts: string[];
  params: URLSearchParams;
}

/**
 * A page: builds its frame into `el` once, and answers the function that fills it with what
 * the node says now (called at once and then on every poll; it throws to show a problem).
 */
export type Page = (el: HTMLElement, route: Route) => () => Promise<void>;

/** Sets the hash's query to `params` (the members that are set), keeping its path. */
export function withParams(route: Route, params: Record<string, string>): string {
  const q = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== '') q.set(name, value);
  const text = q.toString();
  return `#/${route.parts.map(encodeURIComponent).join('/')}${text ? `?${text}` : ''}`;
}

/** A task or graph id: a UUID, any case. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * `id` from the URL's hash, if it is a UUID; else an error for the page to show. Checked before
 * any call: the hash is anyone's to write in a link, and a path built from it with the
 * viewer's key (`../../admin/…`) would reach other routes.
 */
export function idFromHash(id: string, what: string): string {
  if (!UUID.test(id)) throw new Error(`${JSON.stringify(id.slice(0, 80))} is not a ${what} id (a UUID)`);
  return id.toLowerCase();
}
