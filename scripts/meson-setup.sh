#!/usr/bin/env bash
# meson setup BUILD [ARGS...] with CUDA compiled through scripts/nvcc-deps, which writes the dependency
# files meson 1.0's CUDA rule expects, so that editing a header rebuilds the .cu objects that include it
# (docs/NOTES.md, session 31). scripts/test.sh and scripts/demo.sh configure their build folders with it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$1
shift
mkdir -p "$build"
native=$(cd "$build" && pwd)/nvcc-deps.ini  # meson reads it again when it regenerates
printf "[binaries]\ncuda = '%s'\n" "$here/nvcc-deps" > "$native"
meson setup --native-file "$native" "$build" "$@"
