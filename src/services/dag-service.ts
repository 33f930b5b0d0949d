import type { OpenHop } from '../lib/otel-hops.js';
import type { NodeEventSink } from '../domain/events.js';
import type { NewTask, TaskRecord, TaskStatus } from '../domain/model.js';
import { planGraph } from '../domain/dag-graph.js';
import { visibleStatus } from '../domain/lifecycle.js';
import { newTask } from '../domain/new-task.js';
import type { DagSpec } from '../domain/specs.js';
import { uuidv7 } from '../lib/ids.js';
import type { WheelPlacement } from '../actors/wheel-placement.js';
import type { Clock } from '../runtime/clock.js';
import type { DagStore } from '../store/dag-types.js';
import type { TaskStore } from '../store/types.js';
import { tracingOn } from '../lib/otel.js';
import { endSpans, inheritWithin, startSubmits } from './task-spans.js';
import type { MissingTasks } from './missing-tasks.js';
import { assertKnownLimits, type LimitCatalog } from './limit-catalog.js';
import { dueEntry, type Admission } from './support.js';
import type { DagsApi, DagSubmitResult, DagView } from './types.js';

export interface DagServiceDeps {
  dags: DagStore;
  /** Where a traced dependent of an existing task reads that task's trace context. */
  tasks: Pick<TaskStore, 'get'>;
  clock: Clock;
  partitions: number;
  admission: Admission;
  placement: Pick<WheelPlacement, 'place'>;
  events: NodeEventSink;
  /** The 404 of a graph id that names none (saying when it passed retention). */
  missing: Pick<MissingTasks, 'graph'>;
  /** The node's limit declarations: a task may name only those (or keys of a declared family). */
  catalog: Pick<LimitCatalog, 'firstUnknown'>;
}

/** Graphs of tasks (`POST /api/dags`): written all or nothing, their ready roots placed. */
export class DagService implements DagsApi {
  constructor(private readonly deps: DagServiceDeps) {}

  /** The stored trace context of a task (a predecessor outside the graph), for a submit span. */
  private readonly storedTraceparent = async (taskId: string): Promise<string | null> =>
    (await this.deps.tasks.get(taskId))?.traceparent ?? null;

  /**
   * Submits a graph, all or nothing: the planner refuses cycles, duplicate refs and names
   * that are neither refs nor ids before anything is written; the store refuses ids of no
   * task inside the one transaction. Ids are handed out in request order (sorted v7 ids of
   * the same millisecond), so the graph reads back in that order.
   */
  async submitDag(spec: DagSpec): Promise<DagSubmitResult> {
    this.deps.admission.admit();
    const plan = planGraph(spec.tasks.map((t) => ({ ref: t.ref, dependsOn: t.dependsOn })));
    await assertKnownLimits(
      this.deps.catalog,
      spec.tasks.map((t) => t.spec),
      true,
    );
    const now = this.deps.clock.now();
    const ids = spec.tasks.map(() => uuidv7(now)).sort();
    const dagId = uuidv7(now);
    const dependsOn = spec.tasks.map((_, i) => [
      ...plan.localPredecessors[i]!.map((j) => ids[j]!),
      ...plan.externalPredecessors[i]!,
    ]);
    const rows = spec.tasks.map((t, i): NewTask => ({
      ...newTask(t.spec, ids[i]!, now, i, this.deps.partitions),
      dependsOn: dependsOn[i]!,
      dagId,
      dagRef: t.ref,
    }));
    let spans: OpenHop[] | null = null;
    if (tracingOn()) spans = await startSubmits(rows, this.storedTraceparent);
    else inheritWithin(rows);
    let result: Awaited<ReturnType<DagServiceDeps['dags']['submitGraph']>>;
    try {
      result = await this.deps.dags.submitGraph(
        rows,
        { id: dagId, idempotencyKey: spec.idempotencyKey, requestHash: spec.requestHash },
        now,
      );
      if (!result.created) return { created: false, dag: await this.getDag(result.dagId) };
      const due = result.tasks.filter((t) => t.status === 'pending');
      await this.deps.placement.place(due.map(dueEntry));
    } finally {
      endSpans(spans);
    }
    this.deps.events.emit('task:submitted', {
      taskIds: result.tasks.map((t) => t.id),
      taskTypes: result.tasks.map((t) => t.taskType),
    });
    return {
      created: true,
      dag: this.view(
        dagId,
        result.tasks.map((record, i) => ({ ref: spec.tasks[i]!.ref, ...this.node(record, spec.tasks[i]!.dependsOn) })),
      ),
    };
  }

  async getDag(dagId: string): Promise<DagView> {
    const nodes = await this.deps.dags.graph(dagId);
    if (nodes === null) throw await this.deps.missing.graph(dagId);
    const refOf = new Map(nodes.map((n) => [n.task.id, n.task.dagRef ?? n.task.id]));
    return this.view(
      dagId,
      nodes.map((n) => ({
        ref: n.task.dagRef ?? n.task.id,
        ...this.node(
          n.task,
          n.dependsOn.map((id) => refOf.get(id) ?? id),
        ),
      })),
    );
  }

  private view(dagId: string, tasks: DagView['tasks']): DagView {
    const counts: Partial<Record<TaskStatus, number>> = {};
    for (const t of tasks) counts[t.status] = (counts[t.status] ?? 0) + 1;
    return { dagId, status: graphStatus(counts), counts, tasks };
  }

  private node(
    record: TaskRecord,
    dependsOn: string[],
  ): { record: TaskRecord; status: TaskStatus; dependsOn: string[] } {
    return { record, status: visibleStatus(record.status, record.dueMs, this.deps.clock.now()), dependsOn };
  }
}

/** A graph's status: running while any task can still run; then succeeded, failed (a task failed or expired) or cancelled. */
function graphStatus(counts: Partial<Record<TaskStatus, number>>): DagView['status'] {
  const open: TaskStatus[] = ['blocked', 'pending', 'ready', 'running'];
  if (open.some((s) => (counts[s] ?? 0) > 0)) return 'running';
  if ((counts.failed ?? 0) + (counts.expired ?? 0) > 0) return 'failed';
  if ((counts.cancelled ?? 0) > 0) return 'cancelled';
  return 'succeeded';
}
