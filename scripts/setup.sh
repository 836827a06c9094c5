#!/usr/bin/env bash
# Install what mkengine needs on Debian 12 (only what is missing), then
# create the Pallas target's Python environment (.venv/, pinned JAX for the
# CPU from scripts/packages/pallas.pip), then configure and build.
# Usage: scripts/setup.sh [BUILD_DIR]
# Every Debian package the project needs is listed in scripts/packages/*.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}

mapfile -t pkgs < <(cat scripts/packages/*.txt | sed 's/#.*//' | awk 'NF {print $1}' | sort -u)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Pallas target's interpreter: .venv/bin/python with the pinned JAX.
# Skipped when the pins are already installed; when the package index cannot
# be reached, say so and go on (everything but the Pallas target works, and
# the Pallas tests fail until JAX is there).
venv=.venv
if ! "$venv/bin/python" - scripts/packages/pallas.pip 2>/dev/null <<'PY'
import sys
from importlib.metadata import version, PackageNotFoundError
for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    name, _, want = line.partition("==")
    try:
        if version(name) != want:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
then
  echo "setup: installing JAX for the Pallas target into $venv (scripts/packages/pallas.pip)"
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
  if ! "$venv/bin/pip" install -q --disable-pip-version-check -r scripts/packages/pallas.pip; then
    echo "setup: WARNING: could not install JAX from the Python package index (unreachable?);" >&2
    echo "setup: everything but the Pallas target works; its tests fail until JAX is installed" >&2
  fi
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$jobs"
