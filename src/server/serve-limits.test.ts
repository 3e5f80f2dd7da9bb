import { describe, expect, it } from 'vitest';
import { limitsFromFlags, SERVE_LIMIT_FLAGS } from './serve-limits.js';

describe('floe serve limit flags', () => {
  it('reads each flag into its server limit', () => {
    expect(
      limitsFromFlags({ httpHeaderTimeoutMs: '5000', respMaxClientsPerIp: '10', respIdleTimeoutMs: '0' }),
    ).toEqual({ http: { headersTimeoutMs: 5000 }, resp: { maxClientsPerAddress: 10, idleTimeoutMs: 0 } });
    // floe serve closes idle RESP clients after 5 minutes unless told otherwise.
    expect(limitsFromFlags({})).toEqual({ http: {}, resp: { idleTimeoutMs: 300_000 } });
  });

  it('names the flag on a bad value or range', () => {
    expect(() => limitsFromFlags({ httpMaxConnections: '-1' })).toThrow(
      '--http-max-connections must be a non-negative integer (got "-1")',
    );
    expect(() => limitsFromFlags({ httpHeaderTimeoutMs: '60000' })).toThrow(
      '--http-request-timeout-ms: invalid HTTP server limit: requestTimeoutMs = 30000',
    );
    expect(() => limitsFromFlags({ respMaxClients: '0' })).toThrow(
      '--resp-max-clients: invalid RESP server option',
    );
  });

  it('every flag has a distinct name and key', () => {
    expect(new Set(SERVE_LIMIT_FLAGS.map((f) => f.key)).size).toBe(SERVE_LIMIT_FLAGS.length);
    expect(new Set(SERVE_LIMIT_FLAGS.map((f) => f.flag)).size).toBe(SERVE_LIMIT_FLAGS.length);
  });
});
