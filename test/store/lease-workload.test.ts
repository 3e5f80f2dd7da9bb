import { expect, it } from 'vitest';
import { checkGrants, type Grant } from './lease-workload.js';

const g = (o: Partial<Grant>): Grant => ({
  holder: 'h',
  workerId: 0,
  token: 1,
  floorMs: 0,
  maxBoundMs: 0,
  sendAt: 0,
  respAt: 0,
  endAt: 0,
  ...o,
});

it('the grant checker finds double holders, tokens out of order and low floors', () => {
  expect(
    checkGrants([g({ token: 1, respAt: 1, endAt: 5 }), g({ token: 2, sendAt: 6, respAt: 7, endAt: 9 })]),
  ).toEqual([]);
  expect(
    checkGrants([g({ token: 1, respAt: 1, endAt: 8 }), g({ token: 2, sendAt: 6, respAt: 7 })])[0],
  ).toMatch(/held it until/);
  expect(
    checkGrants([g({ token: 3, respAt: 1, endAt: 2 }), g({ token: 2, sendAt: 3, respAt: 4 })])[0],
  ).toMatch(/granted after/);
  expect(
    checkGrants([
      g({ token: 1, respAt: 1, endAt: 2, maxBoundMs: 100 }),
      g({ token: 2, sendAt: 3, respAt: 4, floorMs: 50 }),
    ])[0],
  ).toMatch(/below bound/);
});
