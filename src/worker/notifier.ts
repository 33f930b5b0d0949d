/** A level-free wake-up: `wait()` resolves at the next `notify()`. Used for "a slot or a credit changed". */
export class Notifier {
  private waiting: (() => void)[] = [];

  wait(): Promise<void> {
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  notify(): void {
    if (this.waiting.length === 0) return;
    const waiting = this.waiting;
    this.waiting = [];
    for (const resolve of waiting) resolve();
  }
}
