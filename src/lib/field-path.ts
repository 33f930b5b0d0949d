import { WheelhouseError, type ErrorCode } from './errors.js';

/**
 * Where a value sits in the request. `path` is what error messages and `details.field` show;
 * `index` is the position of the task in a batch, carried into `details.index`. The path
 * string is only built when it is needed (on failure): validating a thousand-task batch
 * creates many of these and fails at most once.
 */
export class FieldPath {
  private built: string | undefined;

  /**
   * @param segment this level's name (`schedule`), or the whole path of a root (`tasks[3]`)
   * @param index the task's index in a batch
   * @param parent the enclosing path; null for a root
   * @param joiner `.` before a member name, `` before an `[i]`
   */
  constructor(
    private readonly segment: string,
    readonly index?: number,
    private readonly parent: FieldPath | null = null,
    private readonly joiner: '.' | '' = '.',
  ) {}

  get path(): string {
    if (this.built === undefined) {
      const head = this.parent === null ? '' : this.parent.path;
      this.built = head === '' ? this.segment : `${head}${this.joiner}${this.segment}`;
    }
    return this.built;
  }

  /** The path of a named member: `schedule` → `schedule.type`. */
  at(name: string): FieldPath {
    return new FieldPath(name, this.index, this, '.');
  }

  /** The path of an array element: `dependencies` → `dependencies[2]`. */
  item(i: number): FieldPath {
    return new FieldPath(`[${i}]`, this.index, this, '');
  }

  /** Throws a `WheelhouseError` naming this field. */
  fail(message: string, code: ErrorCode = 'validation_failed', extra: Record<string, unknown> = {}, cause?: unknown): never {
    const field = this.path === '' ? 'body' : this.path;
    const details: Record<string, unknown> = { field, ...extra };
    if (this.index !== undefined) details.index = this.index;
    throw new WheelhouseError(code, `${field}: ${message}`, { details, cause });
  }
}
