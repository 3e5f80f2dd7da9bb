import { Registry } from 'prom-client';
import { describe, expect, it, vi } from 'vitest';
import { Snowflake } from '../id/snowflake.js';
import { auditPlugin, metricsPlugin, permutationPlugin, shortCodePlugin } from './builtin-plugins.js';
import { functionStrategy, snowflakeStrategy } from './builtin-strategies.js';
import { IdGenerator } from './id-generator.js';
import { type IdPlugin, IdRejectedError } from './types.js';

/** A strategy counting 1, 2, 3, ... */
function counter(name = 'counter') {
  let n = 0n;
  return functionStrategy(name, () => ++n);
}

/** A plugin that logs its hooks into `log`. */
function tracer(
  name: string,
  log: string[],
  order?: number,
  extra: Partial<IdPlugin<bigint>> = {},
): IdPlugin<bigint> {
  return {
    name,
    order,
    before: () => {
      log.push(`${name}.before`);
    },
    after: () => {
      log.push(`${name}.after`);
    },
    ...extra,
  };
}

describe('IdGenerator: strategies per business type, plugins around them', () => {
  it('runs plugins by order (lower first), ties in registration order, before then after', async () => {
    const log: string[] = [];
    const g = new IdGenerator().register('order-no', counter());
    g.use(tracer('c', log, 5), 'order-no');
    g.use(tracer('a', log, 1), 'order-no');
    g.use(tracer('b', log, 5), 'order-no');
    expect(await g.generate('order-no')).toBe(1n);
    expect(log).toEqual(['a.before', 'c.before', 'b.before', 'a.after', 'c.after', 'b.after']);
  });

  it('registration is many-to-many', async () => {
    const log: string[] = [];
    const shared = tracer('shared', log);
    const g = new IdGenerator().register('a', counter()).register('b', counter());
    g.use(shared, 'a', 'b').use(tracer('only-b', log), 'b');
    await g.generate('a');
    await g.generate('b');
    expect(log).toEqual([
      'shared.before',
      'shared.after',
      'shared.before',
      'only-b.before',
      'shared.after',
      'only-b.after',
    ]);
    expect(g.describe()).toEqual([
      { bizType: 'a', strategy: 'counter', plugins: ['shared'] },
      { bizType: 'b', strategy: 'counter', plugins: ['shared', 'only-b'] },
    ]);
    expect(() => g.use(shared, 'nope')).toThrow(/no strategy is registered for business type "nope"/);
  });

  it('before returning false stops the chain with a clear rejection; the strategy never runs', async () => {
    const log: string[] = [];
    const gen = vi.fn(() => 1n);
    const onRejected = vi.fn();
    const g = new IdGenerator({ onRejected }).register('x', functionStrategy('f', gen));
    g.use({ name: 'gate', order: 1, before: () => false }, 'x').use(tracer('later', log, 2), 'x');
    const err = await g.generate('x').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdRejectedError);
    expect((err as IdRejectedError).message).toBe('plugin gate rejected the request for "x"');
    expect((err as IdRejectedError).by).toBe('gate');
    expect(gen).not.toHaveBeenCalled();
    expect(log).toEqual([]);
    expect(onRejected).toHaveBeenCalledTimes(1);
  });

  it('a refusing strategy calls the rejected handler (default: log and throw) with the cause', async () => {
    const warn = vi.fn();
    const g = new IdGenerator({ logger: { warn } }).register(
      'y',
      functionStrategy('broken', () => {
        throw new Error('clock moved backwards');
      }),
    );
    await expect(g.generate('y')).rejects.toMatchObject({
      name: 'IdRejectedError',
      by: 'broken',
      message: 'strategy broken refused "y": clock moved backwards',
    });
    expect(warn).toHaveBeenCalledWith(
      expect.objectContaining({ bizType: 'y', by: 'broken' }),
      'ID request rejected',
    );
    await expect(g.generate('unknown')).rejects.toThrow(
      /no strategy is registered for business type "unknown"/,
    );
  });

  it("an exception in a plugin goes to that plugin's error hook and never corrupts generation", async () => {
    const errors: string[] = [];
    const g = new IdGenerator().register('z', counter());
    g.use(
      {
        name: 'flaky',
        before: () => {
          throw new Error('before boom');
        },
        after: () => {
          throw new Error('after boom');
        },
        error: (_ctx, err, hook) => {
          errors.push(`${hook}: ${(err as Error).message}`);
        },
      },
      'z',
    );
    g.use(
      {
        name: 'worse',
        after: () => {
          throw new Error('x');
        },
        error: () => {
          throw new Error('y');
        },
      },
      'z',
    );
    expect(await g.generate('z')).toBe(1n);
    expect(await g.generate('z')).toBe(2n);
    expect(errors).toEqual([
      'before: before boom',
      'after: after boom',
      'before: before boom',
      'after: after boom',
    ]);
    expect(g.pluginFailures.get('flaky')).toBe(4);
    expect(g.pluginFailures.get('worse')).toBe(2);
  });

  it('generateSync: no promise on the fast path; an async strategy is refused there', async () => {
    const g = new IdGenerator()
      .register('sf', snowflakeStrategy(new Snowflake({ layout: 'floe', worker: 3 })))
      .register(
        'async',
        functionStrategy('a', async () => 1n),
      );
    const a = g.generateSync('sf');
    const b = g.generateSync('sf');
    expect(b).toBeGreaterThan(a);
    expect(() => g.generateSync('async')).toThrow(/asynchronous: use generate\(\)/);
    const batch = await g.generateBatch('sf', 1000);
    expect(new Set(batch).size).toBe(1000);
  });

  it('init runs once, before the first generation, and again after a failure', async () => {
    let inits = 0;
    let fail = true;
    const g = new IdGenerator().register(
      'i',
      functionStrategy(
        'lazy',
        () => 7n,
        async () => {
          inits++;
          if (fail) throw new Error('cluster away');
        },
      ),
    );
    await expect(g.generate('i')).rejects.toThrow('cluster away');
    fail = false;
    expect(await Promise.all([g.generate('i'), g.generate('i')])).toEqual([7n, 7n]);
    expect(inits).toBe(2);
  });
});

describe('built-in plugins', () => {
  it('permutation: unique in, unique out, decode gives the ID back', async () => {
    const perm = permutationPlugin({ secret: 'k' });
    const g = new IdGenerator().register('p', counter());
    g.use(perm, 'p');
    const out = await g.generateBatch('p', 1000);
    expect(new Set(out).size).toBe(1000);
    expect(out.map((v) => perm.decode(v))).toEqual(Array.from({ length: 1000 }, (_, i) => BigInt(i + 1)));
  });

  it('short codes after the permutation; decode through both', async () => {
    const perm = permutationPlugin({ secret: 'k' }) as unknown as IdPlugin<bigint | string> & {
      decode(v: bigint): bigint;
    };
    const code = shortCodePlugin();
    const g = new IdGenerator<bigint | string>().register('s', counter() as never);
    g.use(perm, 's').use(code, 's');
    const c = (await g.generate('s')) as string;
    expect(typeof c).toBe('string');
    expect(perm.decode(code.decode(c))).toBe(1n);
  });

  it('metrics: floe_ids_generated_total per business type', async () => {
    const registry = new Registry();
    const g = new IdGenerator().register('m', counter());
    g.use(metricsPlugin(registry), 'm');
    await g.generateBatch('m', 5);
    expect(await registry.getSingleMetricAsString('floe_ids_generated_total')).toContain(
      'floe_ids_generated_total{biz_type="m"} 5',
    );
  });

  it('audit: one summary per business type and interval (first, last, count), or per ID when asked', async () => {
    const events: Record<string, unknown>[] = [];
    const audit = auditPlugin(
      { record: (e) => events.push(e) },
      { intervalMs: 60_000, source: () => ({ workerId: 3 }) },
    );
    const g = new IdGenerator().register('a', counter());
    g.use(audit, 'a');
    await g.generateBatch('a', 10);
    audit.stop();
    expect(events).toEqual([
      expect.objectContaining({
        type: 'issued',
        bizType: 'a',
        first: '1',
        last: '10',
        count: 10,
        workerId: 3,
      }),
    ]);
    const perId = auditPlugin({ record: (e) => events.push(e) }, { perId: true });
    const g2 = new IdGenerator().register('b', counter());
    g2.use(perId, 'b');
    await g2.generateBatch('b', 3);
    perId.stop();
    expect(events.filter((e) => e.bizType === 'b').map((e) => e.first)).toEqual(['1', '2', '3']);
  });
});
