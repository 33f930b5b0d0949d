/**
 * Acting on many tasks from the dashboard: a confirmation that shows the filter an operation
 * will take, then the operation's progress (`GET /api/operations/{id}`: matched, done, failed,
 * state) polled until it ends, with a Stop button (`DELETE /api/operations/{id}`). Used by the
 * tasks list's selection bar and the failed view's groups.
 */
import { ApiError, api, type Operation } from './api.js';
import { h } from './dom.js';

/** How often a running operation's progress is read, ms: quicker than the page's poll. */
const PROGRESS_MS = 500;

const VERB: Record<Operation['action'], string> = { cancel: 'Cancel', retry: 'Retry', delete: 'Delete' };

/** The filter as the operator reads it: `status = failed · task type = email.send · …`. */
export function filterText(filter: Record<string, string | number>): string {
  return Object.entries(filter)
    .map(([name, value]) => `${name.replace(/_/g, ' ')} = ${typeof value === 'string' ? JSON.stringify(value) : value}`)
    .join(' · ');
}

function problem(error: unknown): string {
  return error instanceof ApiError ? `${error.code}: ${error.message}` : String(error);
}

/**
 * The panel where operations are confirmed and followed. `ask` shows the confirmation of one;
 * once confirmed it is started and followed here until it ends. One at a time: asking again
 * while one runs replaces the confirmation, not the running operation's progress.
 */
export class OperationPanel {
  readonly el = h('section', { class: 'op-panel', id: 'op-panel', hidden: true, 'aria-live': 'polite' });
  private following: string | null = null;

  /** Shows the confirmation of `action` on `filter`, with `note` (what else to know) under it. */
  ask(action: Operation['action'], filter: Record<string, string | number>, note?: string): void {
    if (this.following !== null) return;
    const confirm = h('button', { type: 'button', class: action === 'retry' ? 'primary' : 'danger', id: 'op-confirm' });
    confirm.textContent = `${VERB[action]} all matching`;
    const back = h('button', { type: 'button', class: 'secondary', id: 'op-back' }, 'Back');
    this.el.hidden = false;
    this.el.className = 'op-panel asking';
    this.el.replaceChildren(
      h(
        'p',
        {},
        h('strong', {}, `${VERB[action]} every task matching`),
        ' ',
        h('code', { class: 'op-filter' }, filterText(filter)),
        action === 'delete' ? ' — deleted tasks are gone for good.' : '',
      ),
      h('p', { class: 'muted op-note', hidden: !note }, note ?? ''),
      h('p', { class: 'muted' }, 'Only tasks that exist now are looked at; those submitted later are left alone.'),
      h('div', { class: 'actions' }, confirm, back),
    );
    back.addEventListener('click', () => this.hide());
    confirm.addEventListener('click', () => {
      confirm.disabled = true;
      api<Operation>('/api/operations', 'POST', { action, filter }).then(
        (op) => this.follow(op),
        (error: unknown) => this.say(`Not started: ${problem(error)}`, true),
      );
    });
  }

  private hide(): void {
    this.el.hidden = true;
    this.el.replaceChildren();
  }

  private say(text: string, bad: boolean): void {
    this.el.hidden = false;
    this.el.className = `op-panel ${bad ? 'bad' : ''}`;
    const close = h('button', { type: 'button', class: 'secondary small' }, 'Close');
    close.addEventListener('click', () => this.hide());
    this.el.replaceChildren(h('p', {}, text, ' '), close);
  }

  /** Shows `op`'s progress and reads it again until it ends. */
  private follow(op: Operation): void {
    this.following = op.operation_id;
    const stop = h('button', { type: 'button', class: 'danger small', id: 'op-stop' }, 'Stop');
    stop.addEventListener('click', () => {
      stop.disabled = true;
      api<Operation>(`/api/operations/${op.operation_id}`, 'DELETE').then(
        (ended) => this.show(ended, stop),
        (error: unknown) => {
          // Ended meanwhile (409): the next read shows how.
          if (!(error instanceof ApiError && error.status === 409)) this.say(`Stop: ${problem(error)}`, true);
        },
      );
    });
    this.show(op, stop);
    const tick = (): void => {
      if (this.following !== op.operation_id) return;
      api<Operation>(`/api/operations/${op.operation_id}`).then(
        (now) => {
          this.show(now, stop);
          if (now.state === 'running') setTimeout(tick, PROGRESS_MS);
          else this.following = null;
        },
        () => setTimeout(tick, PROGRESS_MS * 4),
      );
    };
    setTimeout(tick, PROGRESS_MS);
  }

  private show(op: Operation, stop: HTMLButtonElement): void {
    const running = op.state === 'running';
    this.el.hidden = false;
    this.el.className = `op-panel op-${op.state}`;
    this.el.dataset.state = op.state;
    const figure = (label: string, value: number, name: string) =>
      h('span', { class: 'op-figure', 'data-figure': name }, h('strong', {}, value), ` ${label}`);
    const close = h('button', { type: 'button', class: 'secondary small' }, 'Close');
    close.addEventListener('click', () => {
      this.following = null;
      this.hide();
    });
    this.el.replaceChildren(
      h(
        'p',
        { id: 'op-progress', 'data-state': op.state },
        h('strong', {}, `${VERB[op.action]} · `),
        h('code', { class: 'op-filter' }, filterText(op.filter)),
        ' ',
        h(
          'span',
          { class: `badge s-${running ? 'running' : op.state === 'done' ? 'succeeded' : 'failed'}`, id: 'op-state' },
          op.state,
        ),
      ),
      h(
        'p',
        { class: 'op-figures' },
        figure('matched', op.matched, 'matched'),
        ' · ',
        figure('done', op.done, 'done'),
        ' · ',
        figure('failed', op.failed, 'failed'),
        op.error ? h('span', { class: 'error-text' }, ` · ${op.error}`) : null,
      ),
      h('div', { class: 'actions' }, running ? stop : close),
    );
  }
}
