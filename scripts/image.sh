#!/usr/bin/env bash
# `npm run image`: builds the container image petstore-orders:<version> and petstore-orders:latest
# from the Dockerfile, with podman (as a Docker-format image, which keeps HEALTHCHECK) or docker,
# whichever is installed (CONTAINER_ENGINE=podman|docker chooses; PODMAN_RUNTIME=runc passes
# --runtime to podman). Extra arguments go to the build (`npm run image -- --no-cache`).
#
# When a base image of the Dockerfile is neither present nor pullable (a machine that reaches no
# image registry), a stand-in for it is made first from Debian's packages and the npm registry
# (scripts/stand-in-base-images.sh), under the official name: the same Dockerfile builds either way.
set -euo pipefail
cd "$(dirname "$0")/.."

engine=${CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
  if command -v podman >/dev/null; then engine=podman
  elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then engine=docker
  else
    echo "image.sh: neither podman nor a running docker was found: install one (Debian: apt-get install podman)" >&2
    exit 1
  fi
fi
engine_args=()
build_args=()
if [ "$engine" = podman ]; then
  [ -n "${PODMAN_RUNTIME:-}" ] && engine_args+=(--runtime "$PODMAN_RUNTIME")
  build_args+=(--format docker)
fi

version=$(node -p 'require("./package.json").version')
missing=()
for base in $(sed -n 's/^ARG \(NODE\|RUNTIME\)_IMAGE=//p' Dockerfile); do
  case "$base" in */*) ;; *) base="docker.io/library/$base" ;; esac
  if ! "$engine" "${engine_args[@]}" image inspect "$base" >/dev/null 2>&1 && ! "$engine" "${engine_args[@]}" pull "$base" >/dev/null 2>&1; then
    missing+=("$base")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "image.sh: ${missing[*]} not here and not pullable: making stand-ins" >&2
  scripts/stand-in-base-images.sh "$engine" "${missing[@]}"
fi

revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# The source's address without any credentials in it.
source_url=$(git remote get-url origin 2>/dev/null | sed -E 's#://[^/@]*@#://#' || true)

"$engine" "${engine_args[@]}" build "${build_args[@]}" \
  --build-arg "VERSION=$version" \
  --build-arg "REVISION=$revision" \
  --build-arg "SOURCE_URL=${source_url:-unknown}" \
  --tag "petstore-orders:$version" \
  --tag "petstore-orders:latest" \
  "$@" .
echo "image.sh: built petstore-orders:$version and petstore-orders:latest with $engine" >&2
