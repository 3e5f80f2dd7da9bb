// Compact one-line renderings of messages and entries for the trace.

import type { Entry, Message } from '../raft/types.js';

function range(entries: readonly Entry[]): string {
  if (entries.length === 0) return '[]';
  const first = entries[0] as Entry;
  const last = entries[entries.length - 1] as Entry;
  return first.index === last.index
    ? `[${first.index}/${first.term}]`
    : `[${first.index}..${last.index}/${last.term}]`;
}

export function describeEntries(entries: readonly Entry[]): string {
  return range(entries);
}

const decoder = new TextDecoder();

export function describeMessage(m: Message): string {
  const head = `${m.from}->${m.to} ${m.type} t${m.term}`;
  switch (m.type) {
    case 'app':
      return `${head} prev=${m.logIndex}/${m.logTerm} ents=${range(m.entries)} commit=${m.commit}`;
    case 'appResp':
      return `${head} index=${m.index}${m.reject ? ` REJECT hint=${m.rejectHint}/${m.logTermHint}` : ''}`;
    case 'vote':
    case 'preVote':
      return `${head} last=${m.lastIndex}/${m.lastTerm}${m.transfer ? ' transfer' : ''}`;
    case 'voteResp':
    case 'preVoteResp':
      return `${head} ${m.reject ? 'REJECT' : 'GRANT'}`;
    case 'heartbeat':
      return `${head} commit=${m.commit}${m.context.length ? ` ctx=${decoder.decode(m.context)}` : ''}`;
    case 'heartbeatResp':
      return `${head}${m.context.length ? ` ctx=${decoder.decode(m.context)}` : ''}`;
    case 'snap':
      return `${head} snap=${m.snapshot.metadata.index}/${m.snapshot.metadata.term} voters=[${m.snapshot.metadata.conf.voters}] learners=[${m.snapshot.metadata.conf.learners}]`;
    case 'timeoutNow':
      return head;
    case 'readIndex':
      return `${head} ctx=${decoder.decode(m.context)}`;
    case 'readIndexResp':
      return `${head} index=${m.index} ctx=${decoder.decode(m.context)}`;
  }
}
