// Simulated machines and processes.
//
// A Machine has clocks and (for nodes) a disk; it outlives the processes that run on it, so a
// restarted process finds the same disk and the same clocks. A SimProcess is one incarnation:
// once it crashes, its events are dropped and its pending disk operations never settle, exactly
// as code of a dead process never runs on.
//
// Clocks, in global virtual time g (µs):
// - monotonic: runs at `rate` (e.g. 0.9..1.1 of real time) and stops while the machine is
//   suspended (CLOCK_MONOTONIC does not count a suspend);
// - wall: runs at the same rate plus an offset that can jump (NTP steps, an operator), and keeps
//   running through a suspend (it is set from the RTC on resume).
// A process that busy-waits (the ID core's Clock.waitUntil) is "busy" until the global time at
// which its wall clock reaches the target: it reads its clocks as of that time and its events are
// held back until then.

import type { Scheduler, SimEvent } from './scheduler.js';
import type { World } from './world.js';

function noop(): void {}

export class MachineClock {
  private monoAtUs: number;
  private monoMs: number;
  private wallOffsetMs: number;
  private suspendedAtUs: number | undefined;

  constructor(
    private readonly sched: Scheduler,
    /** Rate of both clocks relative to global time. */
    public rate: number,
    monoStartMs: number,
    /** Wall-clock ms at global time 0 (before drift). */
    private readonly wallEpochMs: number,
  ) {
    if (!(rate > 0.1 && rate < 10)) throw new RangeError(`clock rate must be in (0.1, 10), got ${rate}`);
    this.monoAtUs = sched.nowUs;
    this.monoMs = monoStartMs;
    this.wallOffsetMs = 0;
  }

  get suspended(): boolean {
    return this.suspendedAtUs !== undefined;
  }

  get nowUs(): number {
    return this.sched.nowUs;
  }

  /** Monotonic ms at global time `gUs` (>= now). */
  monoAt(gUs: number): number {
    if (this.suspendedAtUs !== undefined) gUs = Math.min(gUs, this.suspendedAtUs);
    return this.monoMs + ((gUs - this.monoAtUs) / 1000) * this.rate;
  }

  /** Wall-clock ms at global time `gUs`. */
  wallAt(gUs: number): number {
    return this.wallEpochMs + (gUs / 1000) * this.rate + this.wallOffsetMs;
  }

  /** Global µs from now until the wall clock reads `ms` (0 if it already does). */
  untilWallUs(ms: number, fromUs: number): number {
    const now = this.wallAt(fromUs);
    return ms <= now ? 0 : Math.ceil(((ms - now) / this.rate) * 1000);
  }

  /** Global µs it takes the monotonic clock to advance `ms` (Infinity while suspended). */
  monoSpanUs(ms: number): number {
    if (this.suspendedAtUs !== undefined) return Number.POSITIVE_INFINITY;
    return Math.max(0, (ms / this.rate) * 1000);
  }

  /** Changes the rate from now on (the clocks stay continuous). */
  setRate(rate: number): void {
    const now = this.sched.nowUs;
    this.rebase(now);
    const wallNow = this.wallAt(now);
    this.rate = rate;
    this.wallOffsetMs += wallNow - this.wallAt(now);
  }

  /** The wall clock jumps by `deltaMs` (negative: backwards). */
  jumpWall(deltaMs: number): void {
    this.wallOffsetMs += deltaMs;
  }

  suspend(): void {
    if (this.suspendedAtUs !== undefined) return;
    this.rebase(this.sched.nowUs);
    this.suspendedAtUs = this.sched.nowUs;
  }

  resume(): void {
    if (this.suspendedAtUs === undefined) return;
    this.monoAtUs = this.sched.nowUs;
    this.suspendedAtUs = undefined;
  }

  private rebase(now: number): void {
    this.monoMs = this.monoAt(now);
    this.monoAtUs = this.suspendedAtUs === undefined ? now : this.suspendedAtUs;
  }
}

export class Machine {
  /** Processes started on this machine, newest last. */
  readonly processes: SimProcess[] = [];
  /** Boots so far (a power loss reboots the machine: a new boot ID). */
  boots = 1;
  /** The monotonic clock's reading when this boot began (0 for the first: the clock's start is its uptime then). */
  private bootMonoBaseMs = 0;

  /** The machine boots again (after a power loss): a new boot ID, and CLOCK_MONOTONIC starts again from 0. */
  reboot(): void {
    this.boots++;
    this.bootMonoBaseMs = this.clock.monoAt(this.clock.nowUs);
  }

  /**
   * CLOCK_MONOTONIC of the current boot at global time `gUs`: one clock for every process of the boot, stopped while
   * the machine is suspended, from 0 again after a reboot (what the SDK's built-in clock reads on a real machine).
   */
  bootMonoAt(gUs: number): number {
    return this.clock.monoAt(gUs) - this.bootMonoBaseMs;
  }

  get bootId(): string {
    return `${this.name}-boot${this.boots}`;
  }

  constructor(
    readonly name: string,
    readonly clock: MachineClock,
  ) {}

  get current(): SimProcess | undefined {
    const p = this.processes[this.processes.length - 1];
    return p?.alive ? p : undefined;
  }

  /**
   * Suspends, resumes and backward wall-clock steps (`backUs`: by how much), with their global times (for the
   * oracle's P1 exemption).
   */
  readonly clockEvents: Array<{ kind: 'suspend' | 'resume' | 'wallBack'; atUs: number; backUs?: number }> =
    [];

  /** The machine sleeps: no process runs, the monotonic clock stops, the wall clock goes on. */
  suspend(): void {
    if (!this.clock.suspended) this.clockEvents.push({ kind: 'suspend', atUs: this.clock.nowUs });
    this.clock.suspend();
  }

  /** The wall clock steps by `deltaMs` (an NTP step, an operator). */
  jumpWall(deltaMs: number): void {
    if (deltaMs < 0)
      this.clockEvents.push({ kind: 'wallBack', atUs: this.clock.nowUs, backUs: -deltaMs * 1000 });
    this.clock.jumpWall(deltaMs);
  }

  /** Backward wall-clock steps in [fromUs, toUs] (µs, summed). */
  wallBackUsBetween(fromUs: number, toUs: number): number {
    let backUs = 0;
    for (const e of this.clockEvents)
      if (e.kind === 'wallBack' && e.atUs >= fromUs && e.atUs <= toUs) backUs += e.backUs ?? 0;
    return backUs;
  }

  /**
   * How much of a suspend since `sinceUs` a backward wall step since then can hide from a lease holder's deadline
   * checks (µs): the smaller of the time suspended and the steps back. docs/client.md ("Clocks") documents such a
   * hidden suspend as outside one-holder-at-a-time (P1), for at most that long; 0 when nothing was hidden.
   */
  suspendHiddenUsSince(sinceUs: number): number {
    let suspendedAt: number | undefined;
    let suspendedUs = 0;
    let backUs = 0;
    for (const e of this.clockEvents) {
      if (e.kind === 'suspend') suspendedAt = e.atUs;
      if (e.kind === 'resume' && suspendedAt !== undefined) {
        suspendedUs += Math.max(0, e.atUs - Math.max(suspendedAt, sinceUs));
        suspendedAt = undefined;
      }
      if (e.kind === 'wallBack' && e.atUs >= sinceUs) backUs += e.backUs ?? 0;
    }
    if (suspendedAt !== undefined)
      suspendedUs += Math.max(0, this.clock.nowUs - Math.max(suspendedAt, sinceUs));
    return Math.min(suspendedUs, backUs);
  }

  resume(): void {
    if (this.clock.suspended) this.clockEvents.push({ kind: 'resume', atUs: this.clock.nowUs });
    this.clock.resume();
    for (const p of this.processes) if (p.alive) p.releaseHeld();
  }
}

/** A virtual timer handle, shaped enough like Node's Timeout for code that calls unref(). */
export class SimTimer {
  ev: SimEvent | undefined;
  cleared = false;
  /** Monotonic ms at which it is due (this arming). */
  due = 0;
  fn: () => void = noop;
  label = '';
  /** The interval's period (ms); undefined for a one-shot timer. */
  repeat: number | undefined;
  constructor(readonly proc: SimProcess) {}
  unref(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  hasRef(): boolean {
    return true;
  }
}

export class SimProcess {
  alive = true;
  /** SIGSTOP-like: no event runs; they queue up and run in order on resume. */
  paused = false;
  /** Global µs until which the process is busy-waiting (its events wait). */
  busyUntilUs = 0;
  /** When it crashed (global µs), if it did. */
  diedAtUs: number | undefined;
  /** It died because its machine lost power: no FIN or RST left the machine for its connections. */
  lostPower = false;
  private readonly held: SimEvent[] = [];
  private readonly timers = new Set<SimTimer>();

  constructor(
    readonly sched: Scheduler,
    readonly machine: Machine,
    /** e.g. "n1#2": node 1, second incarnation. */
    readonly name: string,
    /** Distinct positive number per process of the run (lock-file PIDs). */
    readonly pid: number,
  ) {
    machine.processes.push(this);
  }

  /** Global µs at which this process "is" (later than now while it busy-waits). */
  get effectiveUs(): number {
    return Math.max(this.sched.nowUs, this.busyUntilUs);
  }

  monoMs(): number {
    return this.machine.clock.monoAt(this.effectiveUs);
  }

  /** The machine's CLOCK_MONOTONIC of this boot (`Machine.bootMonoAt`); `monoMs` does not restart at a reboot. */
  bootMonoMs(): number {
    return this.machine.bootMonoAt(this.effectiveUs);
  }

  wallMs(): number {
    return this.machine.clock.wallAt(this.effectiveUs);
  }

  /** Blocks (busy-waits) until the wall clock reads `ms`, as Clock.waitUntil does. */
  busyWaitUntilWall(ms: number): void {
    const d = this.machine.clock.untilWallUs(ms, this.effectiveUs);
    if (d > 0) this.busyUntilUs = this.effectiveUs + d;
  }

  /** Called by the scheduler: true when the event must wait (it has been stored or re-queued). */
  heldBack(ev: SimEvent): boolean {
    if (this.paused || this.machine.clock.suspended) {
      this.held.push(ev);
      return true;
    }
    if (this.busyUntilUs > this.sched.nowUs) {
      this.sched.requeue(ev, this.busyUntilUs);
      return true;
    }
    return false;
  }

  /** Runs what was held back, in order (after a pause or a suspend ends). */
  releaseHeld(): void {
    if (this.paused || this.machine.clock.suspended) return;
    for (const ev of this.held.splice(0)) this.sched.requeue(ev);
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    this.releaseHeld();
  }

  /** The process dies: nothing of it runs again. */
  kill(): void {
    if (!this.alive) return;
    this.alive = false;
    this.diedAtUs = this.sched.nowUs;
    this.held.length = 0;
    for (const t of this.timers) if (t.ev) t.ev.cancelled = true;
    this.timers.clear();
  }

  // ---- timers on this process's monotonic clock --------------------------------------------

  setTimeout(fn: () => void, ms: number, label = 'timer'): SimTimer {
    const t = new SimTimer(this);
    this.arm(t, Math.max(1, Number.isFinite(ms) ? ms : 1), fn, label, undefined);
    return t;
  }

  setInterval(fn: () => void, ms: number, label = 'interval'): SimTimer {
    const t = new SimTimer(this);
    this.arm(t, Math.max(1, Number.isFinite(ms) ? ms : 1), fn, label, Math.max(1, ms));
    return t;
  }

  clearTimer(t: unknown): void {
    if (!(t instanceof SimTimer)) return;
    t.cleared = true;
    if (t.ev) t.ev.cancelled = true;
    t.ev = undefined;
    this.timers.delete(t);
  }

  /** A promise that resolves after `ms` on this process's monotonic clock. */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.setTimeout(resolve, ms, 'sleep'));
  }

  get timerCount(): number {
    return this.timers.size;
  }

  // The timer's state lives on the SimTimer, and one event closure per scheduling calls `fire`: no closures per arming.
  private arm(t: SimTimer, ms: number, fn: () => void, label: string, repeat: number | undefined): void {
    if (!this.alive) return;
    this.timers.add(t);
    t.due = this.monoMs() + ms;
    t.fn = fn;
    t.label = label;
    t.repeat = repeat;
    const span = this.machine.clock.monoSpanUs(ms);
    // While suspended the machine's timers cannot fire: check again right after the resume.
    this.schedule(t, Number.isFinite(span) ? span : 0);
  }

  private schedule(t: SimTimer, delayUs: number): void {
    t.ev = this.sched.after(delayUs, this, t.label, () => this.fire(t));
  }

  private fire(t: SimTimer): void {
    if (t.cleared) return;
    // A suspend stopped the monotonic clock: the timer is not due yet on this machine.
    const left = t.due - this.monoMs();
    if (left > 1e-6) {
      this.schedule(t, this.machine.clock.monoSpanUs(left));
      return;
    }
    const { fn, repeat } = t;
    if (repeat === undefined) this.timers.delete(t);
    fn();
    if (repeat !== undefined && !t.cleared && this.alive) {
      this.timers.delete(t);
      this.arm(t, repeat, fn, t.label, repeat);
    }
  }
}

/** A new process `name#incarnation` on `machine`, registered with the run (a client's restart after a crash). */
export function startProcess(w: World, machine: Machine, name: string, incarnation: number): SimProcess {
  const proc = new SimProcess(w.sched, machine, `${name}#${incarnation}`, w.nextPid());
  w.register(proc);
  return proc;
}
