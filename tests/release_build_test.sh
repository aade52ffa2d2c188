#!/usr/bin/env bash
# A user's Release build (cmake -DCMAKE_BUILD_TYPE=Release, no options)
# compiles our code without -Werror: a compiler's new warning, such as GCC
# 12's -Wrestrict false positive in core/config.cpp, must not fail it.
# Builds the core library only, in a temporary folder.
set -euo pipefail
source_dir=$1
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
cmake -S "$source_dir" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPRONGHORN_CUDA=OFF >/dev/null
if grep -q -- '-Werror' "$build/compile_commands.json"; then
  echo "a Release build without PRONGHORN_WERROR compiles with -Werror" >&2
  exit 1
fi
cmake --build "$build" --target pronghorn_core -j 2 >/dev/null
echo "Release build of pronghorn_core: ok, no -Werror"
