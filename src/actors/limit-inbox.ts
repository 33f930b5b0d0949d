import type { DueEntry } from '../domain/model.js';
import { compareUrgency } from './limit-waiting.js';

/**
 * Most offered entries a key takes in per message when it takes an offer in eagerly (a key with
 * an `on_limit` strategy, which must see every arrival). A larger offer waits in its inbox and
 * is taken in this many at a time, one `absorb` message each, so that a claim's `grant` waits
 * behind one such slice and not behind a flood: at the top of the hour W6's key was offered
 * 200 000 due tasks in 64 messages, took 250 ms of turns to take them in, and a claim of the one
 * worker's socket waited 399 ms for its answer — and every quiet key's task with it.
 *
 * It is also the size above which an offer is kept here at all: a smaller one is taken in at
 * once (a queue key's) or when nothing waits here before it (a strategy key's).
 */
export const ABSORB_SLICE = 1_024;

/**
 * Offers kept in order of urgency, each no more urgent at its head than the one before it at
 * its tail: a flood offered by 64 wheel partitions at once, its tasks alike, is one chain.
 */
interface Chain {
  lists: DueEntry[][];
  /** The list being read, and the position in it. */
  list: number;
  at: number;
}

/** The entry a chain reads next. */
function headOf(chain: Chain): DueEntry {
  return (chain.lists[chain.list] as DueEntry[])[chain.at] as DueEntry;
}

/**
 * Large offers a key has not taken in yet (docs/decisions/0042-a-queue-key-takes-a-flood-in-as-it-needs-it.md).
 * Each is kept sorted by urgency (a wheel fires in due order, so it mostly is already), and they
 * are read merged, most urgent first. A key whose `on_limit` is `queue` (the default) never
 * takes them into its waiting set: it admits straight from here as it gets room, so a flood of
 * 200 000 costs no index entry each at the top of the hour. A strategy key takes them in a
 * slice a turn (`absorb`), as each must be seen arriving.
 */
export class LimitInbox {
  private chains: Chain[] = [];
  private count = 0;
  /** Small offers of a queue key not yet sorted into a chain (`stage`); sorted together at the next read. */
  private staged: DueEntry[] = [];
  /** An `absorb` message is on its way to the key. */
  private absorbing = false;

  /** `slice`: {@link ABSORB_SLICE} (smaller in tests). */
  constructor(private readonly slice = ABSORB_SLICE) {}

  get size(): number {
    return this.count;
  }

  /**
   * What the key takes in now. An offer of at most {@link ABSORB_SLICE} entries is answered
   * whole when `direct` (a queue key: order is kept by the merge, not by arrival) or when
   * nothing waits here; a larger one is kept, and `[]` answered. `absorb`: the next slice.
   */
  takeIn(message: { type: 'offer'; entries: DueEntry[] } | { type: 'absorb' }, direct: boolean): DueEntry[] {
    if (message.type === 'absorb') {
      this.absorbing = false;
      return this.take(this.slice);
    }
    const entries = message.entries;
    if (entries.length <= this.slice && (direct || this.count === 0)) return entries;
    this.keep(entries);
    return [];
  }

  /**
   * Keeps the entries a queue key has no room for yet. They are sorted into a chain together
   * with the others staged before the next read, not each offer on its own: the 64 wheel
   * partitions fire the same stretch of due times, so their offers each overlap the one before
   * and would each start a chain (and every read compare the heads of all of them), where the
   * offers between two reads, sorted together (runs merged), mostly continue the last chain.
   * Nothing here is indexed by task id: a queue key's backlog cost a map entry and a heap
   * place each in its waiting set (W1L: the waiting set and the collections of what it held
   * were most of what a non-binding limit cost). A copy of an entry kept twice is dropped when
   * taken (`takeMerged`).
   */
  stage(entries: readonly DueEntry[]): void {
    for (const entry of entries) this.staged.push(entry);
    this.count += entries.length;
  }

  /** Which of `ids` are here, by a pass over every entry (for a read, which is rare). */
  holding(ids: ReadonlySet<string>): Set<string> {
    const found = new Set<string>();
    const look = (entry: DueEntry): void => {
      if (ids.has(entry.taskId)) found.add(entry.taskId);
    };
    for (const entry of this.staged) look(entry);
    for (const chain of this.chains) {
      for (let l = chain.list; l < chain.lists.length; l++) {
        const list = chain.lists[l] as DueEntry[];
        for (let i = l === chain.list ? chain.at : 0; i < list.length; i++) look(list[i] as DueEntry);
      }
    }
    return found;
  }

  /** Sorts the staged entries into the chains. */
  private seal(): void {
    if (this.staged.length === 0) return;
    const staged = this.staged;
    this.staged = [];
    this.count -= staged.length;
    this.keep(staged, true);
  }

  /** `owned`: the array is this inbox's own, sorted in place if it must be. */
  private keep(entries: DueEntry[], owned = false): void {
    if (entries.length === 0) return;
    let sorted = entries;
    for (let i = 1; i < entries.length; i++) {
      if (compareUrgency(entries[i - 1] as DueEntry, entries[i] as DueEntry) > 0) {
        sorted = owned ? entries.sort(compareUrgency) : [...entries].sort(compareUrgency);
        break;
      }
    }
    this.count += sorted.length;
    const last = this.chains.at(-1);
    if (last !== undefined) {
      const tailList = last.lists.at(-1) as DueEntry[];
      if (compareUrgency(tailList[tailList.length - 1] as DueEntry, sorted[0] as DueEntry) <= 0) {
        last.lists.push(sorted);
        return;
      }
    }
    this.chains.push({ lists: [sorted], list: 0, at: 0 });
  }

  /** The chain whose head is the most urgent (the earlier of equals), or -1 when empty. */
  private best(): number {
    let best = -1;
    let head: DueEntry | undefined;
    for (let c = 0; c < this.chains.length; c++) {
      const h = headOf(this.chains[c] as Chain);
      if (head === undefined || compareUrgency(h, head) < 0) {
        best = c;
        head = h;
      }
    }
    return best;
  }

  /** The most urgent entry here, not taken out. */
  peek(): DueEntry | undefined {
    this.seal();
    const c = this.best();
    if (c < 0) return undefined;
    return headOf(this.chains[c] as Chain);
  }

  /**
   * Takes out up to `max` entries, most urgent first, and only those no less urgent than
   * `bound` when one is given (the head of the key's waiting set, in a merge of the two).
   */
  take(max: number, bound?: DueEntry): DueEntry[] {
    this.seal();
    const out: DueEntry[] = [];
    while (out.length < max) {
      const c = this.best();
      if (c < 0) break;
      const chain = this.chains[c] as Chain;
      // Read the chain's run while it stays the most urgent: one look over the chains per run.
      const other = this.chains.length > 1 ? this.secondHead(c) : undefined;
      while (out.length < max) {
        const list = chain.lists[chain.list] as DueEntry[];
        const entry = list[chain.at] as DueEntry;
        if (other !== undefined && compareUrgency(entry, other) > 0) break;
        // The most urgent of all here is past the bound: nothing else may go.
        if (bound !== undefined && compareUrgency(entry, bound) > 0) return this.took(out);
        out.push(entry);
        if (++chain.at === list.length) {
          chain.at = 0;
          if (++chain.list === chain.lists.length) {
            this.chains.splice(c, 1);
            break;
          }
        }
      }
    }
    return this.took(out);
  }

  private took(out: DueEntry[]): DueEntry[] {
    this.count -= out.length;
    return out;
  }

  /** The most urgent head among the chains but `skip`. */
  private secondHead(skip: number): DueEntry | undefined {
    let head: DueEntry | undefined;
    for (let c = 0; c < this.chains.length; c++) {
      if (c === skip) continue;
      const h = headOf(this.chains[c] as Chain);
      if (head === undefined || compareUrgency(h, head) < 0) head = h;
    }
    return head;
  }

  /** Asks for the next slice if any is left and no ask is on its way (a strategy key's every turn). */
  askIfLeft(askAgain: () => void): void {
    if (this.count === 0 || this.absorbing) return;
    try {
      askAgain();
      this.absorbing = true;
    } catch {
      // A full mailbox: the key's next turn asks again (the tasks are pending in the table).
    }
  }
}
