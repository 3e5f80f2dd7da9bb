// Vitest setup for the unit project: property tests draw their inputs from one fixed seed, so a CI
// run is reproducible and a red build always means a change, not the luck of the draw (a fresh
// `Date.now()` seed failed CI on a corner the code refuses by design). Exploration is separate:
// FLOE_FC_SEED=random draws a new seed per run (`npm run test:props` loops over many), and any
// other value pins that seed. fast-check prints the seed and path of a failure either way.
import fc from 'fast-check';

const pinned = 20261126;
const chosen = process.env.FLOE_FC_SEED;
if (chosen !== 'random') {
  const seed = chosen === undefined || chosen === '' ? pinned : Number(chosen);
  if (!Number.isSafeInteger(seed))
    throw new Error(`FLOE_FC_SEED must be an integer or "random", got "${chosen}"`);
  fc.configureGlobal({ ...fc.readConfigureGlobal(), seed });
}
