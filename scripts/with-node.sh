#!/usr/bin/env bash
# Runs a command with a given Node.js first on PATH: `scripts/with-node.sh 22.23.5 npm test`; with only
# a version it prints what it set up. scripts/node24.sh is this with the Node 24 the project pins.
#
# Node comes from the npm registry's node-<os>-<arch> package (its bin/node), unpacked once into
# ${XDG_CACHE_HOME:-~/.cache}/petstore-orders and reused; npm stays the machine's own. Nothing is
# compiled: better-sqlite3 13 ships Node-API binaries that load on any Node from 22.14 on.
set -euo pipefail

if [ $# -eq 0 ]; then
  echo "usage: scripts/with-node.sh VERSION [COMMAND...]" >&2
  exit 2
fi
version=$1
shift

case "$(uname -s)" in
  Linux) os=linux ;;
  Darwin) os=darwin ;;
  *) echo "with-node.sh: no node package on the npm registry for $(uname -s); install Node $version yourself" >&2; exit 1 ;;
esac
case "$(uname -m)" in
  x86_64 | amd64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "with-node.sh: no node package on the npm registry for $(uname -m); install Node $version yourself" >&2; exit 1 ;;
esac
package="node-$os-$arch"

cache="${XDG_CACHE_HOME:-$HOME/.cache}/petstore-orders"
node_dir="$cache/$package-$version"

# The package is unpacked beside its folder and renamed into place, so the folder never holds half of it.
if [ ! -d "$node_dir" ]; then
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/.unpack.XXXXXX")
  echo "with-node.sh: $package@$version from the npm registry into $node_dir" >&2
  (cd "$tmp" && npm pack --silent "$package@$version" >/dev/null && tar -xzf "$package-$version.tgz" package/bin/node package/package.json)
  mv -T "$tmp/package" "$node_dir" 2>/dev/null || [ -d "$node_dir" ] # another run may have just put it there
  rm -rf "$tmp"
fi

actual=$("$node_dir/bin/node" --version)
if [ "$actual" != "v$version" ]; then
  echo "with-node.sh: $node_dir/bin/node is $actual, not v$version; remove that folder and retry" >&2
  exit 1
fi

export PATH="$node_dir/bin:$PATH"
if [ $# -eq 0 ]; then
  echo "node $actual ($node_dir/bin)"
  exit 0
fi
exec "$@"
