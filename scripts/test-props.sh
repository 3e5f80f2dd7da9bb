#!/usr/bin/env bash
# Property-test exploration: `npm test` pins fast-check's seed (src/testing/fast-check-seed.ts), so
# this runs every unit test file that uses fast-check ROUNDS times with a fresh random seed each.
# A failure prints its seed and path; pin it as a regression test. Bounded: ROUNDS (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
mapfile -t files < <(grep -rl "from 'fast-check'" src --include='*.test.ts' | sort)
for ((i = 1; i <= rounds; i++)); do
  echo "test:props round $i of $rounds (${#files[@]} files, random seeds)"
  FLOE_FC_SEED=random npx vitest run --project unit "${files[@]}"
done
