#!/usr/bin/env bash
# The peers side by side (issue 24 item 5): installs OpenEvolve and
# ShinkaEvolve (pinned in bench/peers/requirements.txt) into their own venv,
# never the project's .venv, then runs bench/peers/run.py, which prints the
# table (its header says what one iteration is for each system).
# Not part of the test command: the first run downloads ~900 MB from PyPI.
#   bench/peers/run.sh [--iterations N] [--small N0] [--repeats R] [--only NAMES]
# MK_PEERS_VENV: where the venv goes (default build/peers-venv).
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${MK_PEERS_VENV:-build/peers-venv}
[ -x build/mkengine ] || { echo "peers: build mkengine first (scripts/setup.sh build)" >&2; exit 2; }
reqs=bench/peers/requirements.txt
pinned() { # every pin of $reqs installed in $venv
  [ -x "$venv/bin/pip" ] || return 1
  [ "$("$venv/bin/pip" freeze 2>/dev/null | grep -cxF -f <(grep '==' "$reqs"))" -eq "$(grep -c '==' "$reqs")" ]
}
if ! pinned; then
  echo "peers: installing the peers into $venv (bench/peers/requirements.txt)"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$reqs"
fi
exec python3 bench/peers/run.py --venv "$venv" "$@"
