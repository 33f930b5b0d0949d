/**
 * Flow control's limits (docs/api.md, "Flow control"): the declarations a page at a time
 * (`GET /api/limits`), each exact key with its live figures (`GET /api/limits/{name}`: its
 * actor's running, waiting and starts in the rate's period; a family has none of its own), a
 * form that declares or overrides one (`PUT`), and pause / resume: a task type's key through
 * `/api/task-types/{type}/pause|resume`, any other key by its concurrency set to 0 and back.
 */
import { ApiError, api, query, type Limit, type LimitPage } from './api.js';
import { h, heading, table } from './dom.js';
import { withParams, type Page } from './page.js';
import { stat } from './pages-cluster.js';

const PAGE = 25;
const ON_LIMIT = ['queue', 'cancel_running', 'cancel_new', 'keep_latest_waiting'];
/** A limit name (docs/api.md): checked before it goes into a path with the viewer's key. */
const NAME = /^[A-Za-z0-9_.:-]{1,198}(:\*|[A-Za-z0-9_.-])?$/;
const TYPE_PREFIX = 'type:';
/** Where the concurrency of a key paused from this tab is kept, to put it back on resume. */
const PAUSED_KEY = 'wheelhouse.limits.paused.';

const isFamily = (name: string): boolean => name.endsWith(':*');

function rateText(l: Limit): string {
  if (l.rate === null) return '—';
  const burst = l.rate.burst > 0 ? `, burst ${l.rate.burst}` : '';
  return `${l.rate.limit} / ${l.rate.period_seconds} s${burst}`;
}

/** The PUT body of a limit as it is, with `changes`. */
function bodyOf(l: Limit, changes: Partial<Pick<Limit, 'concurrency'>> = {}): Record<string, unknown> {
  return { concurrency: l.concurrency, rate: l.rate, on_limit: l.on_limit, weight: l.weight, ...changes };
}

function message(verb: string, error: unknown): string {
  return error instanceof ApiError ? `${verb}: ${error.code}: ${error.message}` : `${verb}: ${String(error)}`;
}

export const limitsPage: Page = (el, route) => {
  const prefix = route.params.get('prefix') ?? '';
  const token = route.params.get('page') ?? '';
  const summary = h('div', { class: 'summary' });
  const notice = h('p', { class: 'notice', role: 'status', hidden: true });
  const say = (text: string, bad = false): void => {
    notice.hidden = false;
    notice.className = bad ? 'notice bad' : 'notice';
    notice.textContent = text;
  };

  // The filter: names starting with a prefix.
  const prefixInput = h('input', { name: 'prefix', placeholder: 'name prefix', value: prefix, spellcheck: 'false' });
  const filter = h(
    'form',
    { class: 'inline', id: 'filter-limits' },
    prefixInput,
    h('button', { type: 'submit' }, 'Filter'),
  );
  filter.addEventListener('submit', (event) => {
    event.preventDefault();
    location.hash = withParams(route, { prefix: prefixInput.value.trim() });
  });

  // The form: declare a limit, or override one (a row's Edit fills it in).
  const field = (name: string, attrs: Record<string, string | number> = {}) =>
    h('input', { name, id: `limit-${name}`, spellcheck: 'false', ...attrs });
  const nameInput = field('name', { placeholder: 'customer:42, customer:*, type:email.send', size: 30 });
  const concurrency = field('concurrency', { type: 'number', min: 0, placeholder: 'unlimited', size: 8 });
  const rateLimit = field('rate', { type: 'number', min: 1, placeholder: 'none', size: 6 });
  const period = field('period', { type: 'number', min: 0.001, step: 'any', placeholder: '1', size: 6 });
  const burst = field('burst', { type: 'number', min: 0, placeholder: '0', size: 5 });
  const onLimit = h(
    'select',
    { name: 'on_limit', id: 'limit-on_limit' },
    ...ON_LIMIT.map((o) => h('option', { value: o }, o)),
  );
  const weight = field('weight', { type: 'number', min: 0.000001, step: 'any', placeholder: '1', size: 5 });
  const labelled = (text: string, input: HTMLElement) => h('label', { class: 'field' }, text, ' ', input);
  const form = h(
    'form',
    { class: 'inline limit-form', id: 'limit-form' },
    labelled('name', nameInput),
    labelled('concurrency', concurrency),
    labelled('starts', rateLimit),
    labelled('per s', period),
    labelled('burst', burst),
    labelled('on limit', onLimit),
    labelled('weight', weight),
    h('button', { type: 'submit', class: 'primary' }, 'Save'),
  );
  const num = (input: HTMLInputElement): number | null => (input.value.trim() === '' ? null : Number(input.value));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const name = nameInput.value.trim();
    if (!NAME.test(name)) {
      say(
        `${JSON.stringify(name.slice(0, 80))} is not a limit name: 1–200 of A–Z a–z 0–9 _ . : -, a family ending in :*`,
        true,
      );
      return;
    }
    const starts = num(rateLimit);
    const body = {
      concurrency: num(concurrency),
      rate: starts === null ? null : { limit: starts, period_seconds: num(period) ?? 1, burst: num(burst) ?? 0 },
      on_limit: onLimit.value,
      weight: num(weight) ?? 1,
    };
    api<Limit>(`/api/limits/${encodeURIComponent(name)}`, 'PUT', body).then(
      (l) => say(`Saved ${l.name}: concurrency ${l.concurrency ?? 'unlimited'}, rate ${rateText(l)}.`),
      (error: unknown) => say(message(`save ${name}`, error), true),
    );
  });
  const edit = (l: Limit): void => {
    nameInput.value = l.name;
    concurrency.value = l.concurrency === null ? '' : String(l.concurrency);
    rateLimit.value = l.rate === null ? '' : String(l.rate.limit);
    period.value = l.rate === null ? '' : String(l.rate.period_seconds);
    burst.value = l.rate === null ? '' : String(l.rate.burst);
    onLimit.value = l.on_limit;
    weight.value = String(l.weight);
    nameInput.focus();
  };

  /** Pause: concurrency 0 (a task type's through its route); resume: what it was before, or none. */
  const toggle = (l: Limit): HTMLButtonElement => {
    const paused = l.concurrency === 0;
    const verb = paused ? 'resume' : 'pause';
    const button = h(
      'button',
      { type: 'button', class: 'secondary small', 'data-action': verb },
      paused ? 'Resume' : 'Pause',
    );
    button.addEventListener('click', () => {
      button.disabled = true;
      const typeName = l.name.startsWith(TYPE_PREFIX) ? l.name.slice(TYPE_PREFIX.length) : null;
      let call: Promise<unknown>;
      if (typeName !== null && !isFamily(l.name)) {
        call = api(`/api/task-types/${encodeURIComponent(typeName)}/${verb}`, 'POST');
      } else if (!paused) {
        sessionStorage.setItem(PAUSED_KEY + l.name, JSON.stringify(l.concurrency));
        call = api(`/api/limits/${encodeURIComponent(l.name)}`, 'PUT', bodyOf(l, { concurrency: 0 }));
      } else {
        const before = JSON.parse(sessionStorage.getItem(PAUSED_KEY + l.name) ?? 'null') as number | null;
        call = api(`/api/limits/${encodeURIComponent(l.name)}`, 'PUT', bodyOf(l, { concurrency: before }));
      }
      call.then(
        () => {
          if (paused) sessionStorage.removeItem(PAUSED_KEY + l.name);
          say(`${paused ? 'Resumed' : 'Paused'} ${l.name}.`);
          button.textContent = paused ? 'Resumed' : 'Paused';
        },
        (error: unknown) => {
          button.disabled = false;
          say(message(`${verb} ${l.name}`, error), true);
        },
      );
    });
    return button;
  };

  const list = h('section', { class: 'list' });
  const pager = h('div', { class: 'pager' });
  el.append(
    heading('Limits', summary),
    h(
      'p',
      { class: 'muted' },
      'Declared limits, a page at a time. Running, waiting and starts are live, from each key’s actor; a family (name:*) has none of its own: each of its keys counts for itself. Setting a name declared already overrides it; a key declared itself overrides its family.',
    ),
    h('div', { class: 'toolbar' }, filter),
    form,
    notice,
    list,
    pager,
  );

  return async () => {
    const page = await api<LimitPage>(`/api/limits${query({ prefix, limit: PAGE, next_token: token })}`);
    // One read per exact key on the page (bounded by PAGE); a key that does not answer shows dashes.
    const live = await Promise.all(
      page.limits.map((l) =>
        isFamily(l.name)
          ? Promise.resolve(null)
          : api<Limit>(`/api/limits/${encodeURIComponent(l.name)}`).catch(() => null),
      ),
    );
    const rows = page.limits.map((l, i) => ({ l, live: live[i] ?? null }));
    const figure = (row: (typeof rows)[number], pick: (x: Limit) => number | null): string =>
      isFamily(row.l.name) ? 'per key' : row.live === null ? '—' : String(pick(row.live) ?? '—');
    summary.replaceChildren(
      stat('on this page', page.limits.length),
      stat('paused', page.limits.filter((l) => l.concurrency === 0).length),
      stat(
        'running',
        rows.reduce((n, r) => n + (r.live?.running ?? 0), 0),
      ),
      stat(
        'waiting',
        rows.reduce((n, r) => n + (r.live?.waiting ?? 0), 0),
      ),
    );
    list.replaceChildren(
      table(
        [
          { title: 'name', cell: (r) => h('code', { 'data-limit': r.l.name }, r.l.name) },
          { title: 'concurrency', num: true, cell: (r) => (r.l.concurrency === null ? 'unlimited' : r.l.concurrency) },
          { title: 'rate', cell: (r) => rateText(r.l) },
          { title: 'on limit', cell: (r) => r.l.on_limit },
          { title: 'weight', num: true, cell: (r) => r.l.weight },
          { title: 'running', num: true, cell: (r) => figure(r, (x) => x.running) },
          { title: 'waiting', num: true, cell: (r) => figure(r, (x) => x.waiting) },
          { title: 'starts / period', num: true, cell: (r) => figure(r, (x) => x.starts_last_period) },
          {
            title: '',
            cell: (r) =>
              h(
                'span',
                { class: 'row-actions' },
                h(
                  'button',
                  { type: 'button', class: 'secondary small', 'data-action': 'edit', onclick: () => edit(r.l) },
                  'Edit',
                ),
                ' ',
                toggle(r.l),
              ),
          },
        ],
        rows,
        prefix
          ? 'No limit starts with that prefix on this page.'
          : 'No limits declared: every task starts as soon as a worker takes it.',
      ),
    );
    pager.replaceChildren(
      token ? h('a', { href: withParams(route, { prefix }) }, '« first page') : h('span', {}),
      page.next_token
        ? h('a', { href: withParams(route, { prefix, page: page.next_token }) }, 'next page »')
        : h('span', { class: 'muted' }, page.limits.length > 0 ? 'last page' : ''),
    );
  };
};
