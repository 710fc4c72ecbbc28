#!/usr/bin/env bash
# Installs the Debian packages the tests, the demo and the docs site (mkdocs) need,
# when they are missing: apt-get as root, otherwise a message naming the packages.
set -euo pipefail

# command -> Debian package
declare -A need=(
  [redis-server]=redis-server
  [redis-cli]=redis-tools
  [ip]=iproute2
  [iptables]=iptables
  [unshare]=util-linux
  [prometheus-redis-exporter]=prometheus-redis-exporter
  [mkdocs]=mkdocs
  # the local plane's real nodes (test/localplane) and their images (make images)
  [containerd]=containerd
  [runc]=runc
  [debootstrap]=debootstrap
)

missing=()
for cmd in "${!need[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${need[$cmd]}")
done
# The CNI plugins are not commands on PATH.
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u | sed '/^$/d')
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all Debian packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "deps: missing Debian packages: ${missing[*]}" >&2
  echo "deps: install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian starts redis-server as a service on install; the tests run their own.
if command -v systemctl >/dev/null 2>&1; then systemctl stop redis-server 2>/dev/null || true; fi
service redis-server stop >/dev/null 2>&1 || true
echo "deps: done"
