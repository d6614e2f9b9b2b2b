#!/usr/bin/env bash
# Runs a command with Node.js 24 (the current LTS) first on PATH, for a machine whose own node is
# older: `scripts/node24.sh npm ci`, then `scripts/node24.sh npm test`. With no command it prints
# which Node it uses. Node comes from the npm registry, unpacked once (scripts/with-node.sh).
exec "$(dirname "$0")/with-node.sh" 24.22.3 "$@"
