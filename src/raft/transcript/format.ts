// How transcripts print the core's data: one line per entry and per message, short enough to read
// and precise enough that any change in the core's behaviour changes the text. Payloads are shown
// as quoted strings (the transcripts only ever propose text), conf changes with the membership they
// carry, messages as `from->to type term ...fields`.

import { roundOf } from '../read-only.js';
import type { ConfState, Entry, HardState, Message, Ready, Snapshot, Status } from '../types.js';

const decoder = new TextDecoder();

export function text(b: Uint8Array): string {
  return decoder.decode(b);
}

/** A message context: the leader's ReadIndex round as `round#N`, anything else as text. */
export function context(b: Uint8Array): string {
  const round = roundOf(b);
  return round === undefined ? text(b) : `round#${round}`;
}

export function conf(c: ConfState): string {
  return `voters=(${c.voters.join(',')}) learners=(${c.learners.join(',')})`;
}

export function hardState(h: HardState): string {
  return `term=${h.term} vote=${h.vote} commit=${h.commit}`;
}

const CHANGE_NAMES = { addLearner: 'add-learner', addVoter: 'add-voter', remove: 'remove' } as const;

export function entry(e: Entry): string {
  const at = `${e.index}/${e.term}`;
  if (e.type === 'normal') return `${at} ${JSON.stringify(text(e.data))}`;
  const c = e.change;
  const resulting = c.resulting === undefined ? ' (no resulting membership)' : ` => ${conf(c.resulting)}`;
  return `${at} conf ${CHANGE_NAMES[c.type]} ${c.nodeId}${resulting}`;
}

export function entries(es: readonly Entry[]): string {
  return `[${es.map(entry).join(', ')}]`;
}

export function snapshot(s: Snapshot): string {
  return `${s.metadata.index}/${s.metadata.term} ${conf(s.metadata.conf)}`;
}

export function message(m: Message): string {
  const head = `${m.from}->${m.to} ${m.type} t${m.term}`;
  switch (m.type) {
    case 'app':
      return `${head} prev=${m.logIndex}/${m.logTerm} commit=${m.commit} entries=${entries(m.entries)}`;
    case 'appResp':
      return m.reject
        ? `${head} index=${m.index} rejected hint=${m.rejectHint}/${m.logTermHint}`
        : `${head} index=${m.index}`;
    case 'vote':
    case 'preVote':
      return `${head} last=${m.lastIndex}/${m.lastTerm}${m.transfer ? ' transfer' : ''}`;
    case 'voteResp':
    case 'preVoteResp':
      return `${head} ${m.reject ? 'rejected' : 'granted'}`;
    case 'heartbeat':
      return `${head} commit=${m.commit}${m.context.length > 0 ? ` ctx=${context(m.context)}` : ''}`;
    case 'heartbeatResp':
      return `${head}${m.context.length > 0 ? ` ctx=${context(m.context)}` : ''}`;
    case 'snap':
      return `${head} snapshot=${snapshot(m.snapshot)}`;
    case 'timeoutNow':
      return head;
    case 'readIndex':
      return `${head} ctx=${context(m.context)}`;
    case 'readIndexResp':
      return `${head} index=${m.index} ctx=${context(m.context)}`;
  }
}

/** The parts of a Ready that are present, indented under a header the caller prints. */
export function ready(rd: Ready): string[] {
  const out: string[] = [];
  if (rd.softState) out.push(`  soft state: ${rd.softState.role} lead=${rd.softState.lead}`);
  if (rd.hardState) out.push(`  hard state: ${hardState(rd.hardState)}`);
  if (rd.snapshot) out.push(`  snapshot: ${snapshot(rd.snapshot)}`);
  if (rd.entries.length > 0) {
    out.push('  entries:');
    for (const e of rd.entries) out.push(`    ${entry(e)}`);
  }
  if (rd.committedEntries.length > 0) {
    out.push('  committed entries:');
    for (const e of rd.committedEntries) out.push(`    ${entry(e)}`);
  }
  if (rd.messages.length > 0) {
    out.push('  messages:');
    for (const m of rd.messages) out.push(`    ${message(m)}`);
  }
  if (rd.readStates.length > 0) {
    out.push('  read states:');
    for (const r of rd.readStates) out.push(`    index=${r.index} ctx=${context(r.context)}`);
  }
  return out;
}

export function status(s: Status): string[] {
  const out = [
    `n${s.id}: ${s.role} term=${s.term} vote=${s.vote} lead=${s.lead} commit=${s.commit} applied=${s.applied} last=${s.lastIndex} ${conf(s.conf)}${
      s.leadTransferee !== 0 ? ` transferee=${s.leadTransferee}` : ''
    }`,
  ];
  if (s.progress) {
    for (const [id, p] of Object.entries(s.progress)) {
      if (Number(id) === s.id) continue;
      out.push(
        `  progress ${id}: ${p.state} match=${p.match} next=${p.next}${p.recentActive ? '' : ' inactive'}`,
      );
    }
  }
  return out;
}
