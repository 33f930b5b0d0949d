/**
 * A time budget for the cron checks of one request. Finding a rule's fire times walks its
 * expression a step at a time, and a rule that fires rarely (`0 0 * 2 1#5`: a fifth Monday in
 * February, once in decades) takes many steps: checking its jitter against the next hundred
 * fire times took about two seconds, all of it on the event loop. The walks check the budget
 * between steps and give up with {@link CronBudgetExceeded} once it is spent.
 */
export class CronBudget {
  readonly #deadline: number;

  /**
   * @param budgetMs the time the checks may take from now, ms
   * @param now a monotonic clock, ms. @default performance.now
   */
  constructor(
    readonly budgetMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.#deadline = now() + budgetMs;
  }

  /** Throws {@link CronBudgetExceeded} when the budget is spent. */
  check(): void {
    if (this.now() > this.#deadline) throw new CronBudgetExceeded(this.budgetMs);
  }
}

/** A cron walk gave up: its request's budget was spent before the fire times were found. */
export class CronBudgetExceeded extends Error {
  constructor(readonly budgetMs: number) {
    super(`the cron checks ran past their budget of ${budgetMs} ms`);
    this.name = 'CronBudgetExceeded';
  }
}

/** A budget of `budgetMs` from now, or none (unbounded) when it is not given. */
export function cronBudget(budgetMs: number | undefined): CronBudget | undefined {
  return budgetMs === undefined ? undefined : new CronBudget(budgetMs);
}
