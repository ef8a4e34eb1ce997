// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// Somebody else's XDP program, for the tests: tep must refuse to replace it
// (crates/tep-sys/tests/xdp.rs). Built by build.sh beside tep_xdp.o.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

SEC("xdp")
int not_tep_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}
