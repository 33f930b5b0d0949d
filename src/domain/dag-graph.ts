import { isUuid } from '../lib/ids.js';
import { BinaryHeap } from '../lib/binary-heap.js';
import { FieldPath } from './field-path.js';

/**
 * Planning for `POST /api/dags`: the graph a request describes, checked and put in order
 * before anything is written. Pure: no I/O, no clock. The request is all or nothing, so every
 * problem here is a `WheelhouseError` naming the field the way the client wrote it
 * (`tasks[3].depends_on[1]: …`, `details.field`, `details.index`), like `validate.ts`:
 * - a ref used twice: `validation_failed`;
 * - a `depends_on` entry that is neither a ref of this request nor a UUID: `unknown_dependency`
 *   (whether a UUID names an existing task is the store's check, made once on `externalIds`);
 * - a cycle, a task depending on itself included: `dependency_cycle`, naming one cycle.
 * Every step is iterative and linear or n log n, so a 10 000-task chain neither overflows the
 * stack nor takes long.
 */

/** One task of the request, as far as the graph is concerned. */
export interface GraphNodeInput {
  /** The task's local name in the request. */
  ref: string;
  /** Refs of this request or existing task ids (UUIDs, any case), as the client wrote them. */
  dependsOn: readonly string[];
}

/** A checked graph: an order to create the tasks in, and each task's predecessors. */
export interface GraphPlan {
  /** Node indices in an order where every node comes after the nodes it depends on (stable: input order among independent nodes). */
  order: number[];
  /** Per node index: the indices (in this request) it depends on, deduplicated. */
  localPredecessors: number[][];
  /** Per node index: existing task ids (lower-cased UUIDs) it depends on, deduplicated. */
  externalPredecessors: string[][];
  /** Every existing task id named anywhere, deduplicated, for one existence check in the store. */
  externalIds: string[];
}

/**
 * Checks the graph of a `POST /api/dags` request and orders it. A `depends_on` entry is
 * first read as a ref of this request (matched exactly), and only otherwise as a task id.
 * `order` is the topological order that, among the tasks whose predecessors are all placed,
 * always takes the earliest in the request, so a request already in dependency order keeps
 * its order.
 */
export function planGraph(nodes: readonly GraphNodeInput[]): GraphPlan {
  const indexOfRef = indexRefs(nodes);
  const { localPredecessors, externalPredecessors, externalIds } = resolveDependencies(nodes, indexOfRef);
  const order = topologicalOrder(localPredecessors);
  if (order.length < nodes.length) failWithCycle(nodes, localPredecessors, order);
  return { order, localPredecessors, externalPredecessors, externalIds };
}

function taskPath(index: number): FieldPath {
  return new FieldPath(`tasks[${index}]`, index);
}

/** ref → index; a ref used twice is `validation_failed` at the second use. */
function indexRefs(nodes: readonly GraphNodeInput[]): Map<string, number> {
  const indexOfRef = new Map<string, number>();
  for (let i = 0; i < nodes.length; i++) {
    const ref = (nodes[i] as GraphNodeInput).ref;
    const first = indexOfRef.get(ref);
    if (first !== undefined) {
      taskPath(i)
        .at('ref')
        .fail(`"${ref}" is already the ref of tasks[${first}]`, 'validation_failed', { first_index: first });
    }
    indexOfRef.set(ref, i);
  }
  return indexOfRef;
}

function resolveDependencies(
  nodes: readonly GraphNodeInput[],
  indexOfRef: ReadonlyMap<string, number>,
): Pick<GraphPlan, 'localPredecessors' | 'externalPredecessors' | 'externalIds'> {
  const localPredecessors: number[][] = [];
  const externalPredecessors: string[][] = [];
  const allExternal = new Set<string>();
  // addedFor[p] === i: p is already among node i's local predecessors.
  const addedFor = new Int32Array(nodes.length).fill(-1);
  for (let i = 0; i < nodes.length; i++) {
    const dependsOn = (nodes[i] as GraphNodeInput).dependsOn;
    const local: number[] = [];
    const external = new Set<string>();
    for (let j = 0; j < dependsOn.length; j++) {
      const name = dependsOn[j] as string;
      const p = indexOfRef.get(name);
      if (p !== undefined) {
        if (addedFor[p] !== i) {
          addedFor[p] = i;
          local.push(p);
        }
      } else if (isUuid(name)) {
        const id = name.toLowerCase();
        external.add(id);
        allExternal.add(id);
      } else {
        taskPath(i)
          .at('depends_on')
          .item(j)
          .fail(`"${String(name)}" is neither a ref in this request nor a task id (a UUID)`, 'unknown_dependency', {
            dependency: name,
          });
      }
    }
    localPredecessors.push(local);
    externalPredecessors.push([...external]);
  }
  return { localPredecessors, externalPredecessors, externalIds: [...allExternal] };
}

/**
 * Kahn's algorithm with a min-heap of the nodes whose predecessors are all placed. Nodes on a
 * cycle, or after one, are never placed: a result shorter than the input means a cycle.
 */
function topologicalOrder(localPredecessors: readonly (readonly number[])[]): number[] {
  const n = localPredecessors.length;
  const waitingOn = new Int32Array(n);
  const successors: number[][] = Array.from({ length: n }, () => []);
  for (let i = 0; i < n; i++) {
    const predecessors = localPredecessors[i] as readonly number[];
    waitingOn[i] = predecessors.length;
    for (const p of predecessors) (successors[p] as number[]).push(i);
  }
  const ready = new BinaryHeap<number>((a, b) => a - b);
  for (let i = 0; i < n; i++) if (waitingOn[i] === 0) ready.push(i);
  const order: number[] = [];
  for (let next = ready.pop(); next !== undefined; next = ready.pop()) {
    order.push(next);
    for (const s of successors[next] as number[]) {
      waitingOn[s] = (waitingOn[s] as number) - 1;
      if (waitingOn[s] === 0) ready.push(s);
    }
  }
  return order;
}

/**
 * Every node left out of `order` waits on another node left out, so walking from one of them
 * to an unplaced predecessor, again and again, must come back to a node already walked: the
 * walk from there on is a cycle. It is reported in `depends_on` direction (`a → b`: a depends
 * on b), starting at its earliest task in the request, at the entry naming the second.
 */
function failWithCycle(
  nodes: readonly GraphNodeInput[],
  localPredecessors: readonly (readonly number[])[],
  order: readonly number[],
): never {
  const placed = new Uint8Array(nodes.length);
  for (const i of order) placed[i] = 1;
  const stepOfWalk = new Int32Array(nodes.length).fill(-1);
  const walk: number[] = [];
  let at = placed.indexOf(0);
  while (stepOfWalk[at] === -1) {
    stepOfWalk[at] = walk.length;
    walk.push(at);
    // Found: an unplaced node always has an unplaced predecessor, or it would have been placed.
    at = (localPredecessors[at] as readonly number[]).find((p) => placed[p] === 0) as number;
  }
  const loop = walk.slice(stepOfWalk[at]);
  const start = loop.indexOf(loop.reduce((a, b) => Math.min(a, b)));
  const cycle = [...loop.slice(start), ...loop.slice(0, start)];

  const first = cycle[0] as number;
  const second = cycle[1 % cycle.length] as number;
  const refs = [...cycle, first].map((i) => (nodes[i] as GraphNodeInput).ref);
  const entry = (nodes[first] as GraphNodeInput).dependsOn.indexOf((nodes[second] as GraphNodeInput).ref);
  const what = cycle.length === 1 ? `"${refs[0]}" depends on itself` : 'the dependencies form a cycle';
  const entryAt: FieldPath = taskPath(first).at('depends_on').item(entry);
  entryAt.fail(`${what}: ${refs.join(' → ')}`, 'dependency_cycle', { cycle: refs });
}
