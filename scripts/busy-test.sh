#!/usr/bin/env bash
# Runs the given test files while two busy loops keep both CPU cores loaded, as they are when other
# work shares the machine: a test that holds here does not depend on how fast the machine is.
#
#   scripts/busy-test.sh test/order-events-http.test.ts [more files...]
#
# BUSY_LOOPS (default 2) sets how many loops run. The loops are killed when the script exits.
# Tests that spawn the server use dist/: build first (npx tsc -p tsconfig.json).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -eq 0 ]; then
  echo "usage: $0 test/<name>.test.ts..." >&2
  exit 2
fi
loops=()
stop_loops() {
  for pid in "${loops[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap stop_loops EXIT
for _ in $(seq 1 "${BUSY_LOOPS:-2}"); do
  node -e 'for (;;) {}' &
  loops+=("$!")
done
node --import tsx --test --test-reporter=spec --test-timeout=600000 "$@"
