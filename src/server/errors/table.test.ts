// The error table is the only list of error codes: every code the HTTP layer sends, every lease,
// sequence and user refusal, and every RESP error of the node's answers is in it, with the same
// HTTP status and RESP prefix the servers use.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  MemberNotCaughtUpError,
  NodeStoppedError,
  NotLeaderError,
  OverloadedError,
  ProposalNotCommittedError,
  ProposalOutcomeUnknownError,
  ReadTimeoutError,
} from '../../node/errors.js';
import { InvalidConfChangeError, ProposalDroppedError } from '../../raft/types.js';
import { LEASE_ERROR_STATUS } from '../floe-services.js';
import { SEQUENCE_ERROR_STATUS } from '../http/sequences.js';
import { toRespError } from '../resp/dispatch.js';
import { errors, respErrorOf } from '../resp/errors.js';
import { ERROR_TABLE, type ErrorSpec, httpStatusOf, isFloeErrorCode, respLineOf } from './table.js';

const serverDir = join(import.meta.dirname, '..');

/** The HTTP layer's sources: http-*.ts, http/**, the dashboard (tests left out). */
function httpSources(): { file: string; text: string }[] {
  const files: string[] = [];
  const walk = (dir: string, rel: string, pick: (name: string) => boolean) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(dir, e.name), join(rel, e.name), () => true);
      else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') && pick(e.name))
        files.push(join(rel, e.name));
    }
  };
  for (const e of readdirSync(serverDir, { withFileTypes: true })) {
    if (e.isFile() && /^http.*\.ts$/.test(e.name) && !e.name.endsWith('.test.ts')) files.push(e.name);
    if (e.isDirectory() && (e.name === 'http' || e.name === 'dashboard'))
      walk(join(serverDir, e.name), e.name, () => true);
  }
  return files.map((file) => ({ file, text: readFileSync(join(serverDir, file), 'utf8') }));
}

/** Codes written as literals where the HTTP layer builds an error body or names a table code. */
function codesInUse(text: string): string[] {
  const found = new Set<string>();
  const patterns = [
    /error:\s*'([a-z_]+)'/g, // { error: 'forbidden', ... }
    /jsonResponse\(\s*\d+,\s*'[^']*',\s*'([a-z_]+)'/g, // http-limits' raw replies
    /return\s+'([a-z_]+)';/g, // http-hardening's framework code mapping
    /(?:send|fail|bad|httpStatusOf|respErrorOf|badInput)\(\s*(?:reply,\s*)?'([a-z_]+)'/g,
    /code:\s*'([a-z_]+)'/g,
  ];
  for (const re of patterns) for (const m of text.matchAll(re)) found.add(m[1]!);
  return [...found];
}

describe('the error table', () => {
  it('lists every code the HTTP layer sends', () => {
    const missing: string[] = [];
    let seen = 0;
    for (const { file, text } of httpSources()) {
      for (const code of codesInUse(text)) {
        seen++;
        if (!isFloeErrorCode(code)) missing.push(`${code} (${file})`);
      }
    }
    expect(seen).toBeGreaterThan(30);
    expect(missing).toEqual([]);
  });

  it('gives lease and sequence refusals the statuses the routes answer', () => {
    for (const [code, status] of [
      ...Object.entries(LEASE_ERROR_STATUS),
      ...Object.entries(SEQUENCE_ERROR_STATUS),
    ]) {
      expect(isFloeErrorCode(code), code).toBe(true);
      if (isFloeErrorCode(code)) expect(httpStatusOf(code), code).toBe(status);
    }
    for (const code of ['no_such_user', 'user_exists', 'would_lock_out'] as const)
      expect(ERROR_TABLE[code].http).toBeDefined();
  });

  it('has an HTTP status or a RESP prefix for every code, and a sentence', () => {
    for (const [code, spec] of Object.entries(ERROR_TABLE) as [string, ErrorSpec][]) {
      expect(spec.http !== undefined || spec.resp !== undefined, code).toBe(true);
      if (spec.http !== undefined) expect(spec.http >= 400 && spec.http < 600, code).toBe(true);
      expect(spec.when.length, code).toBeGreaterThan(10);
      expect(code).toMatch(/^[a-z][a-z_]*$/);
    }
  });

  it('is shown whole in docs/errors.md, each code with its HTTP status and RESP reply', () => {
    const doc = readFileSync(join(serverDir, '..', '..', 'docs', 'errors.md'), 'utf8');
    const rows = new Map<string, string[]>();
    for (const m of doc.matchAll(/^\| `([a-z_]+)` \| ([^|]+) \| ([^|]+) \|/gm))
      rows.set(m[1]!, [m[2]!.trim(), m[3]!.trim()]);
    for (const [code, spec] of Object.entries(ERROR_TABLE) as [string, ErrorSpec][]) {
      const row = rows.get(code);
      expect(row, `docs/errors.md has no row for ${code}`).toBeDefined();
      expect(row![0], code).toBe(spec.http === undefined ? '—' : String(spec.http));
      const resp =
        spec.resp === undefined ? '—' : `\`${spec.resp}${spec.respText ? ` ${spec.respText}` : ''}\``;
      expect(row![1], code).toBe(resp);
    }
    expect([...rows.keys()].filter((c) => !isFloeErrorCode(c))).toEqual([]);
  });

  it("keeps Redis's exact wording for the errors RESP clients recognise", () => {
    expect(errors.syntax().line).toBe('ERR syntax error');
    expect(errors.notInteger().line).toBe('ERR value is not an integer or out of range');
    expect(errors.wrongArity('get').line).toBe("ERR wrong number of arguments for 'get' command");
    expect(errors.noAuth().line).toBe('NOAUTH Authentication required.');
    expect(errors.wrongPass().line).toBe('WRONGPASS invalid username-password pair or user is disabled.');
    expect(errors.moved(12182, '10.0.0.1:7379').line).toBe('MOVED 12182 10.0.0.1:7379');
    expect(errors.clusterDown().line).toBe('CLUSTERDOWN The cluster is down');
    expect(errors.noPerm('no').line).toBe('NOPERM no');
    expect(respErrorOf('unsupported_protocol').line).toBe('NOPROTO unsupported protocol version');
    expect(respLineOf('lease_held', 'worker 3 is held')).toBe('ERR worker 3 is held');
  });

  it("maps the node's errors on RESP to the prefix the table gives their code", () => {
    const server = { logger: { warn: () => {} } } as unknown as Parameters<typeof toRespError>[0];
    const cases: [unknown, keyof typeof ERROR_TABLE][] = [
      [new NotLeaderError(1, undefined), 'cluster_down'],
      [new ProposalNotCommittedError(3, 7, 4), 'not_committed'],
      [new ProposalOutcomeUnknownError('leadershipLost', 'lost'), 'outcome_unknown'],
      [new ReadTimeoutError(5), 'timeout'],
      [new OverloadedError(5), 'overloaded'],
      [new NodeStoppedError('bye'), 'stopped'],
      [new MemberNotCaughtUpError(4, 'slow'), 'not_caught_up'],
      [new InvalidConfChangeError('no'), 'invalid_membership_change'],
      [new ProposalDroppedError('transferring', 1), 'not_committed'],
      [new ProposalDroppedError('tooMuchUncommitted', 1), 'overloaded'],
      [new ProposalDroppedError('confChangePending', 1), 'conf_change_pending'],
      [new Error('boom'), 'internal'],
    ];
    for (const [err, code] of cases) {
      const line = toRespError(server, err, undefined).line;
      const spec: ErrorSpec = ERROR_TABLE[code];
      expect(line.split(' ')[0], `${code}: ${line}`).toBe(spec.resp);
      if (spec.respText) expect(line.startsWith(`${spec.resp} ${spec.respText}`), line).toBe(true);
    }
  });
});
