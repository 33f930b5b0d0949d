/**
 * Graphs of dependent tasks: find one (by id, or among the newest graphs), and
 * draw it as an SVG, left to right by depth (a task one column right of its deepest
 * predecessor), each task coloured by its status and linked to its page.
 */
import { api, type Dag } from './api.js';
import { badge, errorCell, h, heading, link, s, shortId, table, when } from './dom.js';
import { UUID, idFromHash, type Page } from './page.js';
import { stat } from './pages-cluster.js';

/** Tasks drawn at most; a larger graph is listed by its counts only. */
const MAX_DRAWN = 400;
const COL_W = 200;
const ROW_H = 56;
const NODE_W = 160;
const NODE_H = 40;

export const dagsPage: Page = (el) => {
  const input = h('input', { name: 'dag_id', placeholder: 'graph id (a UUID)', size: 38, spellcheck: 'false' });
  const form = h('form', { class: 'inline' }, input, h('button', { type: 'submit' }, 'Open'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const id = input.value.trim().toLowerCase();
    if (UUID.test(id)) location.hash = `#/dags/${id}`;
  });
  const recent = h('section', {});
  el.append(heading('DAGs'), h('div', { class: 'toolbar' }, form), recent);
  return async () => {
    // The newest graphs from their own ids (`GET /admin/dags`: one index probe a graph), so a
    // graph stays listed however many tasks were submitted after it.
    const page = await api<{ dags: { dag_id: string; created_at: string }[] }>('/admin/dags?limit=50');
    recent.replaceChildren(
      h('h2', {}, 'Recent graphs'),
      table(
        [
          { title: 'graph', cell: (g) => link(`#/dags/${g.dag_id}`, shortId(g.dag_id)) },
          { title: 'submitted', cell: (g) => when(g.created_at) },
        ],
        page.dags,
        'No graphs yet. Open one by its id.',
      ),
    );
  };
};

/** Depth of each ref: 0 without predecessors in the graph, else 1 + the deepest predecessor's. */
function depths(dag: Dag): Map<string, number> {
  const byRef = new Map(dag.tasks.map((t) => [t.ref, t]));
  const depth = new Map<string, number>();
  const visit = (ref: string, seen: Set<string>): number => {
    const known = depth.get(ref);
    if (known !== undefined) return known;
    const task = byRef.get(ref);
    if (!task || seen.has(ref)) return 0;
    seen.add(ref);
    const inGraph = task.depends_on.filter((d) => byRef.has(d));
    const d = inGraph.length === 0 ? 0 : 1 + Math.max(...inGraph.map((p) => visit(p, seen)));
    depth.set(ref, d);
    return d;
  };
  for (const t of dag.tasks) visit(t.ref, new Set());
  return depth;
}

/**
 * The path of an edge from the box at `a` to the box at `b`. Between neighbouring columns, one
 * curve. Across more, a curve straight across would pass through the boxes of the columns in
 * between: it goes down (or up) into the gap between rows next to its target's row, which no box
 * crosses in any column, runs along it, and comes out at its target.
 */
function edgePath(a: { x: number; y: number }, b: { x: number; y: number }): string {
  const x1 = a.x + NODE_W;
  const y1 = a.y + NODE_H / 2;
  const x2 = b.x;
  const y2 = b.y + NODE_H / 2;
  if (x2 - a.x <= COL_W) {
    const mid = (x1 + x2) / 2;
    return `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2 - 6},${y2}`;
  }
  const gap = (COL_W - NODE_W) / 2;
  const lane = y1 <= y2 ? b.y - (ROW_H - NODE_H) / 2 : b.y + NODE_H + (ROW_H - NODE_H) / 2;
  return (
    `M${x1},${y1} C${x1 + gap},${y1} ${x1},${lane} ${x1 + gap},${lane} ` +
    `L${x2 - gap},${lane} C${x2},${lane} ${x2 - gap},${y2} ${x2 - 6},${y2}`
  );
}

function draw(dag: Dag): SVGSVGElement {
  const depth = depths(dag);
  const columns: string[][] = [];
  for (const t of dag.tasks) (columns[depth.get(t.ref) ?? 0] ??= []).push(t.ref);
  const at = new Map<string, { x: number; y: number }>();
  columns.forEach((refs, col) => refs.forEach((ref, row) => at.set(ref, { x: 16 + col * COL_W, y: 16 + row * ROW_H })));
  const width = 32 + Math.max(0, columns.length - 1) * COL_W + NODE_W;
  const height = 32 + Math.max(1, ...columns.map((c) => c.length)) * ROW_H - (ROW_H - NODE_H);
  const edges = dag.tasks.flatMap((t) =>
    t.depends_on
      .filter((d) => at.has(d))
      .map((d) => {
        const a = at.get(d) as { x: number; y: number };
        const b = at.get(t.ref) as { x: number; y: number };
        return s('path', { class: 'edge', d: edgePath(a, b), 'marker-end': 'url(#arrow)' });
      }),
  );
  const nodes = dag.tasks.map((t) => {
    const p = at.get(t.ref) as { x: number; y: number };
    const label = t.ref.length > 20 ? `${t.ref.slice(0, 19)}…` : t.ref;
    const a = s(
      'a',
      { href: `#/tasks/${t.task_id}`, class: 'dag-node', 'data-ref': t.ref, 'data-status': t.status },
      s('title', {}, `${t.ref} · ${t.task_type} · ${t.status}${t.last_error ? ` · ${t.last_error}` : ''}`),
      s('rect', { x: p.x, y: p.y, width: NODE_W, height: NODE_H, rx: 6, class: `n-${t.status}` }),
      s('text', { x: p.x + 10, y: p.y + 17, class: 'ref' }, label),
      s('text', { x: p.x + 10, y: p.y + 32, class: 'sub' }, t.status),
    );
    return a;
  });
  return s(
    'svg',
    {
      class: 'dag',
      width,
      height,
      viewBox: `0 0 ${width} ${height}`,
      role: 'img',
      'aria-label': `graph of ${dag.tasks.length} tasks`,
    },
    s(
      'defs',
      {},
      s(
        'marker',
        {
          id: 'arrow',
          viewBox: '0 0 10 10',
          refX: 4,
          refY: 5,
          markerWidth: 8,
          markerHeight: 8,
          orient: 'auto-start-reverse',
        },
        s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }),
      ),
    ),
    ...edges,
    ...nodes,
  );
}

export const dagPage: Page = (el, route) => {
  const hashId = route.parts[1] ?? '';
  const title = heading('Graph');
  const summary = title.querySelector('.actions') as HTMLElement;
  const picture = h('section', { class: 'dag-frame' });
  const legend = h('section', { class: 'table-wrap' });
  el.append(title, picture, legend);
  let drawn = '';
  return async () => {
    const id = idFromHash(hashId, 'graph');
    const dag = await api<Dag>(`/api/dags/${id}`);
    (title.querySelector('h1') as HTMLElement).replaceChildren(
      'Graph ',
      h('code', {}, dag.dag_id),
      ' ',
      badge(dag.status),
    );
    summary.replaceChildren(...Object.entries(dag.counts).map(([status, n]) => stat(status, n)));
    // Redrawn only when a status changed, so the picture does not flicker on every poll.
    const shape = dag.tasks.map((t) => `${t.ref}:${t.status}`).join();
    if (shape !== drawn) {
      drawn = shape;
      picture.replaceChildren(
        dag.tasks.length > MAX_DRAWN
          ? h('p', { class: 'empty' }, `${dag.tasks.length} tasks: too many to draw (at most ${MAX_DRAWN}).`)
          : draw(dag),
      );
    }
    legend.replaceChildren(
      h('h2', {}, 'Tasks'),
      table(
        [
          { title: 'ref', cell: (t) => link(`#/tasks/${t.task_id}`, t.ref) },
          { title: 'type', cell: (t) => t.task_type },
          { title: 'status', cell: (t) => badge(t.status) },
          { title: 'depends on', cell: (t) => t.depends_on.join(', ') || '—' },
          { title: 'attempts', num: true, cell: (t) => t.attempts },
          { title: 'last error', cell: (t) => errorCell(t.last_error) },
        ],
        dag.tasks,
        'This graph has no tasks.',
      ),
    );
  };
};
