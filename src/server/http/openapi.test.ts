// docs/openapi.yaml is generated from the routes' schemas (scripts/gen-openapi.ts): this fails
// when a route or schema changed and `npm run openapi` was not run.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { generateOpenapi, OPENAPI_PATH } from '../../../scripts/gen-openapi.js';

describe('docs/openapi.yaml', () => {
  it('is what `npm run openapi` generates from the routes', async () => {
    const generated = await generateOpenapi();
    const current = readFileSync(OPENAPI_PATH, 'utf8');
    // Every route is in it, with a schema (a route without one would be missing from the paths).
    for (const path of [
      '/v1/apps/{app}/workers/acquire',
      '/v1/users',
      '/v1/sequences',
      '/v1/snowflakes',
      '/v1/kv/{key}',
      '/v1/members',
      '/healthz',
    ])
      expect(generated).toContain(`  ${path}:\n`);
    expect(
      current === generated,
      'docs/openapi.yaml is out of date with the routes: run `npm run openapi`',
    ).toBe(true);
  });
});
