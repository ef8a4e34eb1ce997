// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// tep's XDP steering for gateway mode: on each interface, send to tep's
// AF_XDP sockets exactly the frames tep handles, and leave every other frame
// (ARP, ND, the host's own traffic) to the kernel.
//
//   tep_underlay  UDP to one of tep's tunnel endpoints (address + port).
//   tep_inner     frames for a tunnel: a frame of a network (its 802.1Q
//                 VLAN is one's; untagged, when a network is untagged and
//                 the frame is not for this host), a MAC that is a
//                 tunnel's, any frame not for this host when an L2 default
//                 tunnel exists, or IP to an inner prefix.
//
// Both programs share the maps; tep fills them (crates/tep-sys/src/xdp.rs
// mirrors every layout below). Rebuild with ./build.sh, which checks in
// tep_xdp.o beside this file.

#include <stddef.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88A8
#define IPV6_FRAGMENT 44
// Enough for a hop-by-hop, a routing and a destination-options header in
// front of UDP; more is not seen on tunnel traffic and would cost verifier
// budget.
#define MAX_EXT_HEADERS 4
#define MAX_QUEUES 64
#define VLAN_IDS 4096

#define FAMILY_V4 4
#define FAMILY_V6 6

// A tunnel endpoint tep receives on: family, UDP port and address, all in
// network order; an IPv4 address is in addr[0..4] with the rest zero.
struct endpoint_key {
	__u8 family;
	__u8 pad;
	__be16 port;
	__u8 addr[16];
};

struct lpm_v4_key {
	__u32 prefixlen;
	__u8 addr[4];
};

struct lpm_v6_key {
	__u32 prefixlen;
	__u8 addr[16];
};

// Entry 0 of `config`: the inner interface's own MAC, whether an L2
// default tunnel takes every frame not addressed to it, and the networks'
// flags (NETWORKS_*).
struct tep_config {
	__u8 own_mac[6];
	__u8 l2_default;
	__u8 networks;
};

// Networks are configured: their VLANs are in `inner_vlans`.
#define NETWORKS_TAGGED 1
// A network takes the untagged frames (and priority-tagged, VID 0).
#define NETWORKS_UNTAGGED 2

// Indices of `stats`: one block of four per program.
enum {
	STAT_REDIRECTED = 0,
	STAT_PASSED = 1,
	STAT_REDIRECT_FAILED = 2,
	// Of the passed: frames with an 802.1Q VLAN no network has, or an
	// 802.1ad tag (inner side, networks configured).
	STAT_UNKNOWN_VLAN = 3,
	STATS_PER_ROLE = 4,
	ROLE_UNDERLAY = 0,
	ROLE_INNER = 1,
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct endpoint_key);
	__type(value, __u32);
} endpoints SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u8[6]);
	__type(value, __u32);
} inner_macs SEC(".maps");

// LPM tries must be created without preallocation (the kernel refuses
// otherwise).
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_v4_key);
	__type(value, __u32);
} inner_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_v6_key);
	__type(value, __u32);
} inner_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tep_config);
} config SEC(".maps");

// Per VLAN ID: nonzero where a network has it. An array (every VID has
// its slot): one lookup without hashing, and 16 KiB.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, VLAN_IDS);
	__type(key, __u32);
	__type(value, __u32);
} inner_vlans SEC(".maps");

// One AF_XDP socket per receive queue and role: redirecting by the queue the
// frame arrived on keeps a flow on the worker that owns that queue.
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks_underlay SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks_inner SEC(".maps");

// Per CPU, so that counting needs no atomics; tep adds the CPUs up.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * STATS_PER_ROLE);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void count(__u32 role, __u32 what)
{
	__u32 key = role * STATS_PER_ROLE + what;
	__u64 *n = bpf_map_lookup_elem(&stats, &key);

	if (n)
		*n += 1;
}

static __always_inline int pass(__u32 role)
{
	count(role, STAT_PASSED);
	return XDP_PASS;
}

// Redirect to the role's socket for this queue. With XDP_PASS as the
// fallback, a queue without a socket hands the frame to the kernel instead
// of dropping it; that is counted apart. (A socket whose receive ring is
// full drops after this returns: its own statistics count that.)
static __always_inline int redirect(struct xdp_md *ctx, void *xsks, __u32 role)
{
	long ret = bpf_redirect_map(xsks, ctx->rx_queue_index, XDP_PASS);

	count(role, ret == XDP_REDIRECT ? STAT_REDIRECTED : STAT_REDIRECT_FAILED);
	return ret;
}

// clang does not inline __builtin_memcmp for BPF (it would become a call to
// an extern memcmp, which BPF does not have).
static __always_inline int same_mac(const __u8 *a, const __u8 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] &&
	       a[4] == b[4] && a[5] == b[5];
}

// Reads a `*dst`-sized field at byte `off` of the frame into `*dst`;
// nonzero when the frame ends before it. Multi-buffer (the programs are
// xdp.frags, so that they attach at any MTU): straight from the first
// buffer when the field lies in it, as the headers of every frame on a
// veth and on a NIC whose first buffer is a page or so do; from the
// fragments with bpf_xdp_load_bytes otherwise. Typed, so that the direct
// read keeps the field's alignment (one load, not a byte at a time).
#define LOAD(ctx, off, dst)                                                   \
	({                                                                    \
		void *data_ = (void *)(long)(ctx)->data;                      \
		void *end_ = (void *)(long)(ctx)->data_end;                   \
		void *at_ = data_ + (off);                                    \
		long err_ = 0;                                                \
		if (at_ + sizeof(*(dst)) <= end_)                             \
			*(dst) = *(typeof(dst))at_;                           \
		else                                                          \
			err_ = bpf_xdp_load_bytes(ctx, off, dst, sizeof(*(dst))); \
		err_;                                                         \
	})

struct addr4 {
	__u32 w;
};

struct addr6 {
	__u32 w[4];
};

// The first two bytes of an IPv6 extension header.
struct ext_start {
	__u8 next;
	__u8 len;
};

// Skips the Ethernet header and up to two VLAN tags (802.1ad outer, 802.1Q
// inner, or two 802.1Q); returns the EtherType behind them (network order)
// and sets *l3 to the offset where that header starts, or returns 0 when
// the frame is too short.
static __always_inline __be16 skip_l2(struct xdp_md *ctx, __u32 *l3)
{
	__be16 proto;
	__u32 at = sizeof(struct ethhdr);

	if (LOAD(ctx, offsetof(struct ethhdr, h_proto), &proto))
		return 0;
#pragma unroll
	for (int i = 0; i < 2; i++) {
		if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD))
			break;
		// A tag: TCI (2 bytes), then the next EtherType (2 bytes).
		if (LOAD(ctx, at + 2, &proto))
			return 0;
		at += 4;
	}
	*l3 = at;
	return proto;
}

// The UDP header's offset behind the IPv4 header at `l3`, and the
// destination address into `key`; 0 when the packet is not tep's to look
// at (short, a fragment, not UDP).
static __always_inline __u32 udp_in_v4(struct xdp_md *ctx, __u32 l3,
				       struct endpoint_key *key)
{
	struct iphdr ip;
	struct addr4 dst;

	if (LOAD(ctx, l3, &ip) || ip.ihl < 5)
		return 0;
	// Fragments go to the kernel, which reassembles them.
	if (ip.frag_off & bpf_htons(0x3fff))
		return 0;
	if (ip.protocol != IPPROTO_UDP)
		return 0;
	dst.w = ip.daddr;
	key->family = FAMILY_V4;
	__builtin_memcpy(key->addr, &dst, 4);
	return l3 + ip.ihl * 4;
}

// As udp_in_v4 for IPv6: hop-by-hop, routing and destination options may
// stand before UDP; a fragment header sends the packet to the kernel.
static __always_inline __u32 udp_in_v6(struct xdp_md *ctx, __u32 l3,
				       struct endpoint_key *key)
{
	struct addr6 dst;
	__u8 next;
	__u32 at = l3 + sizeof(struct ipv6hdr);

	if (LOAD(ctx, l3 + offsetof(struct ipv6hdr, nexthdr), &next) ||
	    LOAD(ctx, l3 + offsetof(struct ipv6hdr, daddr), &dst))
		return 0;
#pragma unroll
	for (int i = 0; i < MAX_EXT_HEADERS; i++) {
		// Each of these starts with next header and length in 8-byte
		// units, not counting the first 8.
		struct ext_start ext;

		if (next != IPPROTO_HOPOPTS && next != IPPROTO_ROUTING &&
		    next != IPPROTO_DSTOPTS)
			break;
		if (LOAD(ctx, at, &ext))
			return 0;
		next = ext.next;
		at += (ext.len + 1) * 8;
	}
	if (next != IPPROTO_UDP)
		return 0;
	key->family = FAMILY_V6;
	__builtin_memcpy(key->addr, &dst, 16);
	return at;
}

SEC("xdp.frags")
int tep_underlay(struct xdp_md *ctx)
{
	struct endpoint_key key = {};
	__u32 l3 = 0, udp = 0;
	__be16 proto = skip_l2(ctx, &l3);

	if (proto == bpf_htons(ETH_P_IP))
		udp = udp_in_v4(ctx, l3, &key);
	else if (proto == bpf_htons(ETH_P_IPV6))
		udp = udp_in_v6(ctx, l3, &key);
	if (!udp)
		return pass(ROLE_UNDERLAY);
	if (LOAD(ctx, udp + offsetof(struct udphdr, dest), &key.port))
		return pass(ROLE_UNDERLAY);
	if (!bpf_map_lookup_elem(&endpoints, &key))
		return pass(ROLE_UNDERLAY);
	return redirect(ctx, &xsks_underlay, ROLE_UNDERLAY);
}

// What the networks make of a frame on the inner interface, a trunk
// port: NET_YES for a frame of a network's VLAN, or untagged (priority
// tagged included) when a network is untagged and the frame is not for
// this host; NET_UNKNOWN for a VLAN (or 802.1ad tag) no network has.
enum { NET_NO = 0, NET_YES = 1, NET_UNKNOWN = 2 };

static __always_inline int network_frame(struct ethhdr *eth, void *data_end,
					 const struct tep_config *cfg)
{
	if (!(cfg->networks & (NETWORKS_TAGGED | NETWORKS_UNTAGGED)))
		return NET_NO;
	if (eth->h_proto == bpf_htons(ETH_P_8021Q)) {
		__be16 *tci = (void *)(eth + 1);
		__u32 vid;
		__u32 *net;

		if ((void *)(tci + 1) > data_end)
			return NET_NO;
		vid = bpf_ntohs(*tci) & 0x0fff;
		if (vid != 0) {
			net = bpf_map_lookup_elem(&inner_vlans, &vid);
			return net && *net ? NET_YES : NET_UNKNOWN;
		}
	} else if (eth->h_proto == bpf_htons(ETH_P_8021AD)) {
		return NET_UNKNOWN;
	}
	if ((cfg->networks & NETWORKS_UNTAGGED) &&
	    !same_mac(eth->h_dest, cfg->own_mac))
		return NET_YES;
	return NET_NO;
}

// To the kernel, counted apart when a network could have had it.
static __always_inline int pass_inner(int net)
{
	if (net == NET_UNKNOWN)
		count(ROLE_INNER, STAT_UNKNOWN_VLAN);
	return pass(ROLE_INNER);
}

// The Ethernet header (and a tag's TCI) is read in the first buffer: no
// driver hands XDP a first buffer shorter than that.
SEC("xdp.frags")
int tep_inner(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct tep_config *cfg;
	__u32 zero = 0;
	int net = NET_NO;
	__u32 l3 = 0;
	__be16 proto;

	if ((void *)(eth + 1) > data_end)
		return pass(ROLE_INNER);
	cfg = bpf_map_lookup_elem(&config, &zero);
	if (cfg)
		net = network_frame(eth, data_end, cfg);
	if (net == NET_YES)
		return redirect(ctx, &xsks_inner, ROLE_INNER);
	// A MAC behind an L2 tunnel (VXLAN, Geneve, ...).
	if (bpf_map_lookup_elem(&inner_macs, eth->h_dest))
		return redirect(ctx, &xsks_inner, ROLE_INNER);
	// An L2 default tunnel takes everything not addressed to this host,
	// broadcast and multicast included: the tunnel is the rest of the
	// segment.
	if (cfg && cfg->l2_default && !same_mac(eth->h_dest, cfg->own_mac))
		return redirect(ctx, &xsks_inner, ROLE_INNER);

	// L3 tunnels: the inner destination's longest prefix.
	proto = skip_l2(ctx, &l3);
	if (proto == bpf_htons(ETH_P_IP)) {
		struct lpm_v4_key key = { .prefixlen = 32 };
		struct addr4 dst;

		if (LOAD(ctx, l3 + offsetof(struct iphdr, daddr), &dst))
			return pass_inner(net);
		__builtin_memcpy(key.addr, &dst, 4);
		if (bpf_map_lookup_elem(&inner_v4, &key))
			return redirect(ctx, &xsks_inner, ROLE_INNER);
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct lpm_v6_key key = { .prefixlen = 128 };
		struct addr6 dst;

		if (LOAD(ctx, l3 + offsetof(struct ipv6hdr, daddr), &dst))
			return pass_inner(net);
		__builtin_memcpy(key.addr, &dst, 16);
		if (bpf_map_lookup_elem(&inner_v6, &key))
			return redirect(ctx, &xsks_inner, ROLE_INNER);
	}
	return pass_inner(net);
}
