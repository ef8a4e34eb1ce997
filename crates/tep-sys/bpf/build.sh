#!/usr/bin/env bash
# Rebuilds tep_xdp.o from tep_xdp.c, and the tests' xdp_pass.o (somebody
# else's program) from xdp_pass.c. The objects are checked in, as cilium/ebpf's
# bpf2go does, so that building tep needs no clang; the clang that built them
# is recorded in tep_xdp.clang-version. The test `xdp_object_matches_source`
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
for prog in tep_xdp xdp_pass; do
  "$clang" -O2 -g -target bpf -Wall -Werror \
    -I"/usr/include/$(uname -m)-linux-gnu" \
    -c "$prog.c" -o "$out/$prog.o"
done
"$clang" --version | head -n1 > "$out/tep_xdp.clang-version"
