/**
 * The dashboard: a single page routed by the URL's hash (`#/cluster`, `#/tasks/<id>`, …). Each
 * page builds its frame once and answers a `refresh` that the app calls at once and then every
 * POLL_MS while the page is shown and the tab visible, one at a time, so what it shows is live
 * without reloading. Nothing here holds data between pages but the API key.
 */
import { ApiError, api, forgetKey, saveKey, savedKey, whenUnauthorized } from './api.js';
import { h } from './dom.js';
import { activityPage } from './pages-activity.js';
import { actorPage, actorsPage } from './pages-actors.js';
import { clusterPage } from './pages-cluster.js';
import { dagPage, dagsPage } from './pages-dags.js';
import { failuresPage } from './pages-failures.js';
import { limitsPage } from './pages-limits.js';
import { queuesPage } from './pages-queues.js';
import { schedulesPage } from './pages-schedules.js';
import { taskPage } from './pages-task.js';
import { tasksPage } from './pages-tasks.js';
import { workersPage } from './pages-workers.js';
import type { Page, Route } from './page.js';

const POLL_MS = 1500;

const NAV: { path: string; title: string }[] = [
  { path: 'cluster', title: 'Cluster' },
  { path: 'activity', title: 'Activity' },
  { path: 'queues', title: 'Queues' },
  { path: 'tasks', title: 'Tasks' },
  { path: 'failed', title: 'Failed' },
  { path: 'workers', title: 'Workers' },
  { path: 'schedules', title: 'Schedules' },
  { path: 'limits', title: 'Limits' },
  { path: 'dags', title: 'DAGs' },
  { path: 'actors', title: 'Actors' },
];

/** The page for a route: `parts` are the hash's path segments after the section. */
function pageFor(route: Route): Page {
  const [section, ...rest] = route.parts;
  switch (section) {
    case 'activity':
      return activityPage;
    case 'queues':
      return queuesPage;
    case 'tasks':
      return rest[0] ? taskPage : tasksPage;
    case 'failed':
      return failuresPage;
    case 'workers':
      return workersPage;
    case 'schedules':
      return schedulesPage;
    case 'limits':
      return limitsPage;
    case 'dags':
      return rest[0] ? dagPage : dagsPage;
    case 'actors':
      return rest.length >= 2 ? actorPage : actorsPage;
    default:
      return clusterPage;
  }
}

function parseHash(): Route {
  const hash = location.hash.replace(/^#\/?/, '');
  const [path = '', search = ''] = hash.split('?', 2);
  const parts = path
    .split('/')
    .filter((p) => p.length > 0)
    .map(decodeURIComponent);
  return { parts: parts.length > 0 ? parts : ['cluster'], params: new URLSearchParams(search) };
}

const main = document.getElementById('main') as HTMLElement;
const nav = document.getElementById('nav') as HTMLElement;
const live = document.getElementById('live') as HTMLElement;
const signOut = document.getElementById('sign-out') as HTMLButtonElement;

let generation = 0;
let timer: ReturnType<typeof setTimeout> | null = null;

/** Shows the page of the current hash and keeps it live until the hash changes. */
function show(): void {
  generation++;
  const mine = generation;
  if (timer !== null) clearTimeout(timer);
  if (savedKey() === null) {
    // A node that asks for no key (`wheelhouse dev`) opens every page without one: its page
    // says so (`<html data-keys="off">`, src/http/dashboard-routes.ts), and no sign-in is shown.
    if (document.documentElement.dataset.keys === 'off') render(mine, false);
    else login();
    return;
  }
  render(mine, true);
}

/** Shows the page of the current hash, `withKey` when the viewer signed in (the sign-out button). */
function render(mine: number, withKey: boolean): void {
  const route = parseHash();
  const section = route.parts[0];
  for (const a of nav.querySelectorAll('a')) a.classList.toggle('current', a.dataset.section === section);
  signOut.hidden = !withKey;
  nav.hidden = false;
  const frame = h('div', { class: 'page' });
  const problem = h('div', { class: 'problem', role: 'alert', hidden: true });
  main.replaceChildren(problem, frame);
  const refresh = pageFor(route)(frame, route);
  const tick = async (): Promise<void> => {
    if (mine !== generation) return;
    if (document.visibilityState === 'visible') {
      try {
        await refresh();
        problem.hidden = true;
        live.textContent = `live · ${new Date().toISOString().slice(11, 19)} UTC`;
        live.className = 'live ok';
      } catch (error) {
        if (mine !== generation) return;
        problem.hidden = false;
        problem.textContent = error instanceof ApiError ? `${error.code}: ${error.message}` : String(error);
        // The node answered, only not with what the page asked for (a task or graph that is not
        // there, a key without the scope): it is still live. Only no answer, or a failing node, is not.
        if (error instanceof ApiError && error.status >= 400 && error.status < 500) {
          live.textContent = `live · ${new Date().toISOString().slice(11, 19)} UTC`;
          live.className = 'live ok';
        } else {
          live.textContent = 'not answering';
          live.className = 'live bad';
        }
      }
    }
    if (mine === generation) timer = setTimeout(() => void tick(), POLL_MS);
  };
  void tick();
}

/** The login form: an API key, checked against `GET /admin/cluster` before it is kept. */
function login(message?: string): void {
  signOut.hidden = true;
  nav.hidden = true;
  live.textContent = '';
  const input = h('input', {
    type: 'password',
    name: 'key',
    id: 'key',
    autocomplete: 'current-password',
    placeholder: 'whk_…',
    required: true,
  });
  const error = h('p', { class: 'problem', role: 'alert', hidden: message === undefined }, message ?? '');
  const form = h(
    'form',
    { class: 'login' },
    h('h1', {}, 'Sign in'),
    h(
      'p',
      { class: 'muted' },
      'The dashboard calls the API with your key: the read and ops scopes show every page, submit adds the buttons (cancel, retry, pause, resume). It is kept in this tab only. A node that asks for no key (wheelhouse dev) takes any.',
    ),
    h('label', { for: 'key' }, 'API key'),
    input,
    error,
    h('button', { type: 'submit', class: 'primary' }, 'Sign in'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    saveKey(input.value.trim());
    api('/admin/cluster').then(
      () => show(),
      (e: unknown) => {
        forgetKey();
        error.hidden = false;
        error.textContent = e instanceof ApiError ? `${e.code}: ${e.message}` : String(e);
      },
    );
  });
  main.replaceChildren(form);
  input.focus();
}

nav.replaceChildren(...NAV.map((n) => h('a', { href: `#/${n.path}`, 'data-section': n.path }, n.title)));
signOut.addEventListener('click', () => {
  forgetKey();
  show();
});
whenUnauthorized(() => {
  if (savedKey() === null) return;
  forgetKey();
  generation++;
  login('The node no longer accepts this key.');
});
window.addEventListener('hashchange', show);
show();
