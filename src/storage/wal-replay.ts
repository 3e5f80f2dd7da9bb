// Replays WAL segments into the state they describe. Pure logic over buffers: the file I/O (and
// cutting a torn tail) is the caller's (wal.ts), so every corruption rule is testable in memory.
import type { ConfState, Entry, HardState } from '../raft/types.js';
import { bugOn } from '../testing/bug-switches.js';
import { WalCorruptionError } from './errors.js';
import {
  decodeEntries,
  decodeHardState,
  decodeHeader,
  decodeMarker,
  PayloadError,
  type SegmentHeader,
  type SnapshotMarker,
} from './payload.js';
import {
  checkPreamble,
  FRAME_HEADER_BYTES,
  RecordType,
  readFrame,
  SEGMENT_PREAMBLE_BYTES,
  segmentFormat,
} from './record.js';

/** A segment file: `<seq as 16 hex digits>-<firstIndex as 16 hex digits>.wal`. */
export interface SegmentRef {
  seq: number;
  firstIndex: number;
  name: string;
}

const SEGMENT_NAME = /^([0-9a-f]{16})-([0-9a-f]{16})\.wal$/;

export function segmentFileName(seq: number, firstIndex: number): string {
  return `${seq.toString(16).padStart(16, '0')}-${firstIndex.toString(16).padStart(16, '0')}.wal`;
}

export function parseSegmentFileName(name: string): SegmentRef | undefined {
  const m = SEGMENT_NAME.exec(name);
  if (!m) return undefined;
  const seq = Number.parseInt(m[1]!, 16);
  const firstIndex = Number.parseInt(m[2]!, 16);
  if (!Number.isSafeInteger(seq) || !Number.isSafeInteger(firstIndex)) return undefined;
  return { seq, firstIndex, name };
}

/** What the writer needs to continue the log, and what each new segment header repeats. */
export interface WalTail {
  /** Index of the last entry written (or of the last reset snapshot, whichever came last). */
  lastIndex: number;
  lastTerm: number;
  hardState: HardState;
  /** Newest snapshot marker. */
  snapshot: SnapshotMarker;
  bootstrapConf: ConfState;
}

export interface TornTail {
  file: string;
  /** Where the first bad frame starts; the file is cut to this length. */
  offset: number;
  /** File length before the cut. */
  fileBytes: number;
  reason: string;
  /** Test-only ('wal-cut-complete-frame'): cut without fencing the vote, as before issue 9. */
  unfenced?: boolean;
}

/** The state the retained segments describe. */
export interface WalState {
  tail: WalTail;
  /** Live entries, consecutive, oldest first (everything still in the retained segments). */
  entries: Entry[];
  /** Index just before entries[0] (when entries is empty: tail.lastIndex). */
  prevIndex: number;
  /** Term of prevIndex, when the log knows it. */
  prevTerm: number | undefined;
  /** Snapshot markers, oldest first (the first segment header's marker included, when non-zero). */
  markers: SnapshotMarker[];
  /** Highest snapshot index seen: entries at or below it must never be rewritten. */
  floor: number;
}

/**
 * Feeds segments in order. Rules (anything else is a WalCorruptionError naming file and offset):
 * - segment seqs are consecutive, each starts with a header matching its name;
 * - a later segment's header continues the previous segment (firstIndex = last index + 1, same
 *   hard state, snapshot marker and bootstrap membership);
 * - an entries record starts at most one past the last index (no gaps) and above the newest
 *   snapshot index; it replaces any entries at or after its first index (later record wins);
 * - a local snapshot marker names an entry the log holds with the same term;
 * - an incomplete frame (the file ends inside it) is a torn tail, returned for the caller to cut,
 *   only when it is the last thing in the last segment and not the segment header. A complete frame
 *   that fails a checksum is corruption wherever it is: it was written whole, so it may have been
 *   fsynced and acknowledged. Earlier segments were fsynced before the next one was created, so
 *   nothing in them is ever torn.
 */
export class WalReplayer {
  private state: WalState | undefined;
  private lastSeq = 0;

  /** Replays one segment. Returns the torn tail found at its end, if any (only when `isLast`). */
  feed(ref: SegmentRef, buf: Buffer, isLast: boolean): TornTail | undefined {
    if (this.state !== undefined && ref.seq !== this.lastSeq + 1) {
      throw new WalCorruptionError(
        ref.name,
        0,
        `segment seq ${ref.seq} follows seq ${this.lastSeq}: ${ref.seq - this.lastSeq - 1} segment(s) missing`,
      );
    }
    this.lastSeq = ref.seq;
    const bad = checkPreamble(buf);
    if (bad !== undefined) throw new WalCorruptionError(ref.name, 0, bad);
    const format = segmentFormat(buf);
    let offset = SEGMENT_PREAMBLE_BYTES;
    let first = true;
    for (;;) {
      const fr = readFrame(buf, offset);
      if (fr.kind === 'end') {
        if (first) throw new WalCorruptionError(ref.name, offset, 'segment has no header record');
        return undefined;
      }
      if (fr.kind === 'incomplete' && isLast && !first) {
        // Test-only ('wal-torn-frame-shaped-refused'): the old rule, torn only if no valid frame follows.
        if (bugOn('wal-torn-frame-shaped-refused') && validFrameAfter(buf, offset + 1)) {
          throw new WalCorruptionError(ref.name, offset, `${fr.reason}, and a valid frame follows it`);
        }
        return { file: ref.name, offset, fileBytes: buf.length, reason: fr.reason };
      }
      // Test-only: the issue-9 bug, a complete frame that fails its checksum cut as if torn, unfenced.
      if (fr.kind === 'bad' && isLast && !first && bugOn('wal-cut-complete-frame')) {
        return { file: ref.name, offset, fileBytes: buf.length, reason: fr.reason, unfenced: true };
      }
      if (fr.kind !== 'ok') {
        // A segment header is written and fsynced before the segment is renamed into place, and an
        // earlier segment was fsynced whole before the next was created: incomplete there is damage.
        const where = first ? ' (segment header)' : fr.kind === 'incomplete' ? ' (in a sealed segment)' : '';
        throw new WalCorruptionError(ref.name, offset, fr.reason + where);
      }
      try {
        if (first) this.header(ref, decodeHeader(fr.payload));
        else this.record(ref, offset, fr.type, fr.payload, format);
      } catch (err) {
        if (err instanceof PayloadError) throw new WalCorruptionError(ref.name, offset, err.message);
        throw err;
      }
      first = false;
      offset = fr.next;
    }
  }

  /** The replayed state; undefined when no segment was fed. */
  result(): WalState | undefined {
    return this.state;
  }

  private header(ref: SegmentRef, h: SegmentHeader): void {
    if (h.seq !== ref.seq || h.firstIndex !== ref.firstIndex) {
      throw new WalCorruptionError(
        ref.name,
        SEGMENT_PREAMBLE_BYTES,
        `header says seq ${h.seq} firstIndex ${h.firstIndex}, file name says seq ${ref.seq} firstIndex ${ref.firstIndex}`,
      );
    }
    const s = this.state;
    if (s === undefined) {
      // Oldest retained segment: everything before it was compacted away behind a snapshot.
      this.state = {
        tail: {
          lastIndex: h.firstIndex - 1,
          lastTerm: h.prevTerm,
          hardState: h.hardState,
          snapshot: h.snapshot,
          bootstrapConf: h.bootstrapConf,
        },
        entries: [],
        prevIndex: h.firstIndex - 1,
        prevTerm: h.prevTerm,
        markers: h.snapshot.index > 0 ? [h.snapshot] : [],
        floor: h.snapshot.index,
      };
      return;
    }
    const t = s.tail;
    const problems: string[] = [];
    if (h.firstIndex !== t.lastIndex + 1)
      problems.push(`firstIndex ${h.firstIndex} but the log ends at ${t.lastIndex}`);
    if (h.prevTerm !== t.lastTerm) problems.push(`prevTerm ${h.prevTerm} but the last term is ${t.lastTerm}`);
    if (!sameHardState(h.hardState, t.hardState)) problems.push('hard state differs from the replayed one');
    if (!sameMarker(h.snapshot, t.snapshot)) problems.push('snapshot marker differs from the replayed one');
    if (!sameConf(h.bootstrapConf, t.bootstrapConf)) problems.push('bootstrap membership differs');
    if (problems.length > 0) {
      throw new WalCorruptionError(
        ref.name,
        SEGMENT_PREAMBLE_BYTES,
        `segment header does not continue the previous segment: ${problems.join('; ')}`,
      );
    }
  }

  private record(ref: SegmentRef, offset: number, type: number, payload: Buffer, format: number): void {
    const s = this.state!;
    switch (type) {
      case RecordType.entries:
        this.entries(ref, offset, decodeEntries(payload, format));
        return;
      case RecordType.hardState:
        s.tail.hardState = decodeHardState(payload);
        return;
      case RecordType.snapshot:
        this.marker(ref, offset, decodeMarker(payload));
        return;
      default:
        throw new WalCorruptionError(
          ref.name,
          offset,
          `record type ${type} is not allowed after the segment header`,
        );
    }
  }

  private entries(ref: SegmentRef, offset: number, ents: Entry[]): void {
    const s = this.state!;
    const lo = ents[0]!.index;
    const hi = ents[ents.length - 1]!.index;
    if (lo > s.tail.lastIndex + 1) {
      throw new WalCorruptionError(
        ref.name,
        offset,
        `entries start at ${lo} but the log ends at ${s.tail.lastIndex} (gap)`,
      );
    }
    if (lo <= s.floor) {
      throw new WalCorruptionError(
        ref.name,
        offset,
        `entries start at ${lo}, at or below snapshot index ${s.floor}`,
      );
    }
    const have = s.entries;
    const base = have.length > 0 ? have[0]!.index : s.prevIndex + 1;
    if (lo >= base) {
      have.length = lo - base;
      for (const e of ents) have.push(e);
    } else {
      // Rewrites entries older than the retained segments hold: the record itself is the log now.
      s.entries = ents;
      s.prevIndex = lo - 1;
      s.prevTerm = undefined;
    }
    s.tail.lastIndex = hi;
    s.tail.lastTerm = ents[ents.length - 1]!.term;
  }

  private marker(ref: SegmentRef, offset: number, m: SnapshotMarker): void {
    const s = this.state!;
    if (m.reset) {
      // A leader's snapshot replaced the log: older entries are void.
      s.entries = [];
      s.prevIndex = m.index;
      s.prevTerm = m.term;
      s.tail.lastIndex = m.index;
      s.tail.lastTerm = m.term;
    } else {
      if (m.index > s.tail.lastIndex) {
        throw new WalCorruptionError(
          ref.name,
          offset,
          `snapshot marker at ${m.index} is beyond the last index ${s.tail.lastIndex}`,
        );
      }
      const t = termIn(s, m.index);
      if (t !== undefined && t !== m.term) {
        throw new WalCorruptionError(
          ref.name,
          offset,
          `snapshot marker (${m.index}, term ${m.term}) but the log has term ${t} there`,
        );
      }
    }
    s.tail.snapshot = m;
    s.markers.push(m);
    if (m.index > s.floor) s.floor = m.index;
  }
}

/** Term of entry `index` in a replayed state, when known. */
export function termIn(s: WalState, index: number): number | undefined {
  if (index === s.prevIndex) return s.prevTerm;
  const first = s.entries[0];
  if (first === undefined || index < first.index) return undefined;
  return s.entries[index - first.index]?.term;
}

function sameHardState(a: HardState, b: HardState): boolean {
  return a.term === b.term && a.vote === b.vote && a.commit === b.commit;
}

function sameMarker(a: SnapshotMarker, b: SnapshotMarker): boolean {
  return a.index === b.index && a.term === b.term && a.reset === b.reset;
}

export function sameConf(a: ConfState, b: ConfState): boolean {
  const eq = (x: number[], y: number[]) => x.length === y.length && x.every((v, i) => v === y[i]);
  return eq(a.voters, b.voters) && eq(a.learners, b.learners);
}

/** Test-only ('wal-torn-frame-shaped-refused'): whether a complete, valid frame starts anywhere at or after `from`. */
function validFrameAfter(buf: Buffer, from: number): boolean {
  for (let o = from; o + FRAME_HEADER_BYTES <= buf.length; o++) {
    if (readFrame(buf, o).kind === 'ok') return true;
  }
  return false;
}
