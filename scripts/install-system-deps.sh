#!/usr/bin/env bash
# Installs the Debian packages the tests and benchmarks need, only when one is missing.
set -euo pipefail
missing=()
for pkg in "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "Updating Debian's package lists (apt-get update) ..." >&2
$SUDO apt-get update -qq >/dev/null
echo "Installing Debian packages (apt-get install): ${missing[*]} ..." >&2
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
