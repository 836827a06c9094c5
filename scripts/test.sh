#!/usr/bin/env bash
# The whole test suite: install + build, luacheck on lua/, ctest on the
# normal build, then the C tests (c/*) again under AddressSanitizer + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
jobs=$(nproc 2>/dev/null || echo 2)

echo "== luacheck"
luacheck -q lua targets tests/lua examples bench

# tests/python/candidates/ are deliberately broken candidate kernels
echo "== pyflakes"
git ls-files '*.py' | grep -v '^tests/python/candidates/' | xargs pyflakes3

# fails on any function over 80 lines in engine/, lua/, targets/
echo "== function lengths (scripts/fnlen.py: none over 80 lines)"
scripts/fnlen.py --top 10

# the C of engine/, targets/ and tests/c/ follows .clang-format (clang-format
# 14, Debian 12's); example banks are model answers and are left as written
echo "== clang-format"
git ls-files engine targets tests/c | grep -E '\.(c|h)$' | xargs clang-format --dry-run -Werror

echo "== ctest (build)"
(cd build && ctest --output-on-failure -j "$jobs" -LE long) # long: tests/long, hours

echo "== ctest (ASan + UBSan, C tests)"
cmake -S . -B build-asan -DMK_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j "$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j "$jobs" -R "^c/")
