// The run's event trace. Every line is folded into a digest (so two runs of one seed can be
// compared by a single string), the most recent lines are kept for failure reports, and in
// verbose mode every line is also handed to a sink as it happens.

import { Digest } from './hash.js';

export class Trace {
  private readonly digest = new Digest();
  private readonly ring: string[] = [];
  private ringStart = 0;
  lines = 0;

  constructor(
    private readonly ringSize: number,
    private readonly sink?: (line: string) => void,
  ) {}

  add(timeUs: number, text: string): void {
    const line = `${formatTime(timeUs)} ${text}`;
    this.digest.updateString(line).updateString('\n');
    this.lines++;
    if (this.ring.length < this.ringSize) {
      this.ring.push(line);
    } else if (this.ringSize > 0) {
      this.ring[this.ringStart] = line;
      this.ringStart = (this.ringStart + 1) % this.ringSize;
    }
    this.sink?.(line);
  }

  /** The last lines, oldest first. */
  tail(): string[] {
    return [...this.ring.slice(this.ringStart), ...this.ring.slice(0, this.ringStart)];
  }

  hash(): string {
    return this.digest.hex();
  }
}

/** Virtual microseconds as milliseconds with three decimals, e.g. "t=1234.567ms". */
export function formatTime(us: number): string {
  const ms = Math.floor(us / 1000);
  const frac = String(us % 1000).padStart(3, '0');
  return `t=${ms}.${frac}ms`;
}
