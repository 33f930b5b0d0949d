/**
 * Building the page: elements from plain values (text is always set as text, never parsed as
 * HTML, so nothing a task carries can become markup), tables with their empty state, status
 * badges and the time formats every page shares.
 */

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | null | undefined | ((event: Event) => void)>;

/** An element with attributes (`on…` members are listeners) and children. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

/** An SVG element, as `h`. */
export function s<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el: Element, attrs: Attrs): void {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (typeof value === 'function') el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
}

function append(el: Element, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === 'number' ? String(child) : child);
  }
}

/** A column of `table`: its heading, its cell, and `num` for right-aligned tabular numbers. */
export interface Column<T> {
  title: string;
  cell: (row: T) => Child;
  num?: boolean;
}

/** A table of `rows`, or `empty` in its place when there are none. */
export function table<T>(columns: Column<T>[], rows: readonly T[], empty: string): HTMLElement {
  if (rows.length === 0) return h('p', { class: 'empty' }, empty);
  return h(
    'table',
    {},
    h('thead', {}, h('tr', {}, ...columns.map((c) => h('th', { class: c.num ? 'num' : null }, c.title)))),
    h(
      'tbody',
      {},
      ...rows.map((row) => h('tr', {}, ...columns.map((c) => h('td', { class: c.num ? 'num' : null }, c.cell(row))))),
    ),
  );
}

/** A status as a coloured badge; the colour is the status's everywhere (dashboard.css). */
export function badge(status: string): HTMLElement {
  return h('span', { class: `badge s-${status}` }, status);
}

/** A task's last error in a list: its first line, clipped, the whole of it in the tooltip. */
export function errorCell(error: string | null | undefined): HTMLElement | string {
  if (!error) return '—';
  return h('span', { class: 'error-text clip', title: error }, error.split('\n', 1)[0] ?? '');
}

/** A link inside the dashboard. */
export function link(hash: string, ...children: Child[]): HTMLAnchorElement {
  return h('a', { href: hash }, ...children);
}

/**
 * An id by its last 12 characters, the whole one in its tooltip. (Ids are UUIDv7: their first
 * characters are the time they were made, the same for every task of a minute.)
 */
export function shortId(id: string): HTMLElement {
  return h('code', { title: id }, `…${id.slice(-12)}`);
}

/** A time as `2026-12-01 12:00:05` UTC, or a dash. */
export function time(iso: string | null | undefined): string {
  if (!iso) return '—';
  return iso.replace('T', ' ').replace(/\.\d{3}Z$/, '');
}

/** A duration, ms, as `350 ms`, `4.2 s`, `3 min 5 s`, `2 h 10 min`, `3 d 4 h`. */
export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '—';
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(ms)} ms`;
  if (abs < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const sec = Math.round(abs / 1000);
  const sign = ms < 0 ? '−' : '';
  if (sec < 3600) return `${sign}${Math.floor(sec / 60)} min ${sec % 60} s`;
  if (sec < 86_400) return `${sign}${Math.floor(sec / 3600)} h ${Math.floor((sec % 3600) / 60)} min`;
  return `${sign}${Math.floor(sec / 86_400)} d ${Math.floor((sec % 86_400) / 3600)} h`;
}

/** How far `iso` is from now: `in 4.2 s`, `3 min 5 s ago`. */
export function relative(iso: string | null | undefined): string {
  if (!iso) return '—';
  const ms = Date.parse(iso) - Date.now();
  return ms >= 0 ? `in ${duration(ms)}` : `${duration(-ms)} ago`;
}

/** A time with how far it is from now in its tooltip. */
export function when(iso: string | null | undefined): HTMLElement {
  return h('time', { datetime: iso ?? null, title: relative(iso) }, time(iso));
}

/** JSON, indented, in a block. */
export function json(value: unknown): HTMLElement {
  return h('pre', { class: 'json' }, value === undefined ? '—' : JSON.stringify(value, null, 2));
}

/** A heading row: the title and, to its right, whatever else (buttons, a summary). */
export function heading(title: string, ...right: Child[]): HTMLElement {
  return h('div', { class: 'heading' }, h('h1', {}, title), h('div', { class: 'actions' }, ...right));
}

/**
 * A button that asks twice: the first click arms it ("Sure? …") for 3 s, the second runs
 * `action`. (The browser's confirm() would block the page's live updates.)
 */
export function confirmButton(label: string, action: () => Promise<void>, kind = 'danger'): HTMLButtonElement {
  const button = h('button', { type: 'button', class: kind }, label);
  let armed: ReturnType<typeof setTimeout> | null = null;
  button.addEventListener('click', () => {
    if (armed === null) {
      button.textContent = `Sure? ${label}`;
      button.classList.add('armed');
      armed = setTimeout(() => {
        armed = null;
        button.textContent = label;
        button.classList.remove('armed');
      }, 3000);
      return;
    }
    clearTimeout(armed);
    armed = null;
    button.disabled = true;
    button.textContent = `${label}…`;
    void action().finally(() => {
      button.disabled = false;
      button.textContent = label;
      button.classList.remove('armed');
    });
  });
  return button;
}
