#!/usr/bin/env bash
# Install what is missing, build, and run the offline demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
exec build/mkengine script examples/scheduler_demo.lua
