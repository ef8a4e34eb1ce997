#!/usr/bin/env bash
# Rebuilds tep_xdp.o from tep_xdp.c (the object is checked in, as cilium/ebpf's
# bpf2go does, so that building tep needs no clang) and records the clang that
# built it in tep_xdp.clang-version. The test `xdp_object_matches_source`
# (crates/tep-sys/tests/xdp.rs) rebuilds it the same way and compares.
#
# Needs: clang, the kernel UAPI headers (linux-libc-dev) and libbpf's
# bpf_helpers.h (libbpf-dev). Usage: build.sh [OUTPUT_DIR] (default: here).
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-.}"
clang="${CLANG:-clang}"
# Relative source path and no absolute paths in the command: the object's
# debug info then does not depend on where the tree is checked out.
"$clang" -O2 -g -target bpf -Wall -Werror \
  -I"/usr/include/$(uname -m)-linux-gnu" \
  -c tep_xdp.c -o "$out/tep_xdp.o"
"$clang" --version | head -n1 > "$out/tep_xdp.clang-version"
