#!/usr/bin/env bash
# bench-gateway.sh: tep's gateway mode (AF_XDP between two interfaces)
# beside the kernel doing the same job and Open vSwitch's userspace
# datapath, in one run.
#
#   sudo ./examples/bench-gateway.sh [--quick] [--json] [--parts rate,tcp] [--variants V,...] [--workers N]
#
# Three namespaces stand for three hosts:
#
#   client (c0: 10.9.0.2) ── gi [gateway] gu 192.0.2.1 ── pu 192.0.2.2 peer (kernel VXLAN vx0: 10.9.0.1)
#
# The gateway bridges the client's subnet into VXLAN 42 towards the peer.
#
# Part "rate": packets per second per worker core. UDP floods (iperf3 -u,
# 64-byte and 1492-byte inner IP packets) through tep, client → peer
# (encap) and peer → client (decap), outer checksums zero and full. Each
# figure is what the worker handled divided by the CPU time its thread
# used (so a flood slower than tep still measures tep's cost per packet),
# beside `tep-bench pipeline`'s figure for the same kind, size and mode:
# the difference is the cost of the AF_XDP I/O per packet. The kernel's
# receive processing of the client and the peer is steered to the other
# CPU (RPS), as if they were other machines.
#
# Part "tcp": iperf3 TCP client → peer (fwd) and peer → client (rev), 1 and
# 4 streams, through each variant:
#   tep          tep gateway mode, VXLAN full checksums;
#   tep-rps      the same, the client's and the peer's receive processing
#                steered to the CPU tep's worker does not use (RPS): on one
#                2-CPU machine the veth is a function call, and without
#                this the worker's sendto runs the peer's whole TCP stack;
#   kernel       the gateway's kernel: a bridge of gi and a VXLAN device;
#   kernel-xdp   the same with an XDP program that passes everything on gi
#                and gu: what an XDP program on a veth costs the kernel
#                (its peer loses GSO and GRO: every frame MTU-sized);
#   ovs-afxdp    Open vSwitch's userspace datapath with an AF_XDP port, as
#                ../shared/bench/ovs-userspace-baseline.sh sets it up (OVS
#                as the VXLAN endpoint of its namespace, a kernel VXLAN
#                peer), run by this script in the same run.
# The TX checksum offload of c0 and pu is off in every variant: a veth
# hands its peer the checksums it was asked to fill still partial, which
# XDP cannot fill (a NIC would have).
#
# --workers N (default 1): tep runs N workers over N queues (`[gateway]
# queues = N`), the veths of every variant get N queues each way, the
# workers sit on CPUs from the worker's on (round the machine), and the
# per-core figure is per CPU second of all the workers together.
#
# Three rounds (--quick: one, shorter); each figure is the median of its
# rounds; the tables give the ratios to the kernel and to OVS measured in
# the same run. About fifteen minutes (--quick: three).
#
# Environment: TEP=/path/to/tep skips the build (tep-bench is the one
# beside it, or TEP_BENCH=/path/to/tep-bench); OVS_BASELINE=path to the
# OVS script (default ../shared/bench/ovs-userspace-baseline.sh beside the
# repository). Exit 1 if a variant carried nothing, 2 for bad usage or a
# missing tool.
set -euo pipefail
script=bench-gateway.sh
# shellcheck source=lib/two-hosts.sh
. "$(dirname "$0")/lib/two-hosts.sh"

quick=0
json=0
parts=rate,tcp
all_variants="tep,tep-rps,kernel,kernel-xdp,ovs-afxdp"
variants=$all_variants
workers=1
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=1 ;;
    --json) json=1 ;;
    --parts) parts=${2:?--parts needs a list}; shift ;;
    --parts=*) parts=${1#*=} ;;
    --variants) variants=${2:?--variants needs a list}; shift ;;
    --variants=*) variants=${1#*=} ;;
    --workers) workers=${2:?--workers needs a count}; shift ;;
    --workers=*) workers=${1#*=} ;;
    -h | --help) usage 0 ;;
    *) echo "bench-gateway.sh: unknown option $1" >&2; usage 2 ;;
    esac
    shift
done
case "$workers" in
'' | *[!0-9]* | 0) echo "bench-gateway.sh: --workers: a count of 1 or more, not '$workers'" >&2; exit 2 ;;
esac
IFS=, read -r -a variant_list <<<"$variants"
for v in "${variant_list[@]}"; do one_of variant "$v" "$all_variants"; done
if [ "$quick" = 1 ]; then
    seconds=3 reps=1 flood=2
else
    seconds=10 reps=3 flood=5
fi

preflight ip:iproute2 iperf3:iperf3 python3:python3 taskset:util-linux timeout:coreutils ethtool:ethtool
repo=$(cd "$(dirname "$0")/.." && pwd)
ovs_script=${OVS_BASELINE:-$repo/../shared/bench/ovs-userspace-baseline.sh}
case ",$variants," in
*,ovs-afxdp,*)
    if ! command -v ovs-vswitchd >/dev/null || [ ! -r "$ovs_script" ]; then
        echo "note: ovs-afxdp skipped: needs openvswitch-switch (apt-get install openvswitch-switch) and $ovs_script" >&2
        variants=$(echo ",$variants," | sed 's/,ovs-afxdp,/,/; s/^,//; s/,$//')
        IFS=, read -r -a variant_list <<<"$variants"
    fi
    ;;
esac

find_tep tep-bench
say() { echo "$@" >&2; }

tag="tepgw$$"
nc="${tag}c" ng="${tag}g" np="${tag}p"
work=$(mktemp -d "/tmp/${tag}.XXXXXX")
tep_pid=""
cleanup() {
    [ -n "$tep_pid" ] && kill "$tep_pid" 2>/dev/null && wait "$tep_pid" 2>/dev/null
    for ns in "$nc" "$ng" "$np"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'echo " interrupted" >&2; exit 130' INT
trap 'exit 143' TERM
in_c() { ip netns exec "$nc" "$@"; }
in_g() { ip netns exec "$ng" "$@"; }
in_p() { ip netns exec "$np" "$@"; }

# The worker's CPU; the rest of the machine's work goes to the other.
worker_cpu=1 other_cpu=0
[ "$(nproc)" -gt 1 ] || worker_cpu=0
# The workers' CPUs: from the worker's on, round the machine.
worker_cpus=$(seq 0 $((workers - 1)) | while read -r i; do echo $(((worker_cpu + i) % $(nproc))); done | paste -sd, | sed 's/,/, /g')

# chain_up MODE: the three namespaces, the peer's kernel VXLAN with outer
# checksums (MODE full) or without (zero).
chain_up() {
    local mode=$1 ns
    chain_down
    for ns in "$nc" "$ng" "$np"; do
        ip netns add "$ns"
        ip netns exec "$ns" ip link set lo up
    done
    local q="numtxqueues $workers numrxqueues $workers"
    # shellcheck disable=SC2086 # $q is several words
    ip link add c0 netns "$nc" $q type veth peer name gi netns "$ng" $q
    # shellcheck disable=SC2086
    ip link add gu netns "$ng" $q type veth peer name pu netns "$np" $q
    in_c ip addr add 10.9.0.2/24 dev c0
    in_g ip addr add 192.0.2.1/24 dev gu
    in_p ip addr add 192.0.2.2/24 dev pu
    # Room for the tunnel overhead of 1500-byte inner frames (50 bytes).
    in_g ip link set gu mtu 1600
    in_p ip link set pu mtu 1600
    in_c ip link set c0 up
    in_g ip link set gi up
    in_g ip link set gu up
    in_p ip link set pu up
    in_c ethtool -K c0 tx off >/dev/null
    in_p ethtool -K pu tx off >/dev/null
    local csum=udpcsum
    [ "$mode" = zero ] && csum=noudpcsum
    in_p ip link add vx0 type vxlan id 42 local 192.0.2.2 remote 192.0.2.1 dstport 4789 dev pu $csum
    in_p ip addr add 10.9.0.1/24 dev vx0
    in_p ip link set vx0 up
}
chain_down() {
    [ -n "$tep_pid" ] && { kill "$tep_pid" 2>/dev/null; wait "$tep_pid" 2>/dev/null || true; }
    tep_pid=""
    for ns in "$nc" "$ng" "$np"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    done
}

# rps ON: the client's and the peer's receive processing on the other CPU.
rps() {
    local mask
    mask=$(printf '%x' $((1 << other_cpu)))
    in_c sh -c "for q in /sys/class/net/c0/queues/rx-*; do echo $mask > \$q/rps_cpus; done"
    in_p sh -c "for q in /sys/class/net/pu/queues/rx-*; do echo $mask > \$q/rps_cpus; done"
}

# tep_up MODE: tep in gateway mode on gi and gu, its workers (one per
# queue) on worker_cpus.
tep_up() {
    cat >"$work/gw.toml" <<EOF
[gateway]
inner = "gi"
underlay = "gu"
queues = $workers
cpus = [$worker_cpus]
control = "$work/gw.sock"

[[tunnel]]
name = "vx"
kind = "vxlan"
local = "192.0.2.1"
remote = "192.0.2.2"
vni = 42
checksum = "$1"
EOF
    ip netns exec "$ng" "$TEP" run -c "$work/gw.toml" 2>"$work/gw.log" &
    tep_pid=$!
    for _ in $(seq 100); do
        "$TEP" show tunnels --socket "$work/gw.sock" >/dev/null 2>&1 && break
        sleep 0.05
    done
    "$TEP" show tunnels --socket "$work/gw.sock" >/dev/null 2>&1 || { cat "$work/gw.log" >&2; return 1; }
    in_c ping -c 2 -W 1 -q 10.9.0.1 >/dev/null || { say "tep: no ping"; cat "$work/gw.log" >&2; return 1; }
}

# kernel_up [xdp]: the gateway's kernel bridges gi and a VXLAN device;
# with "xdp", a pass-everything XDP program sits on gi and gu.
kernel_up() {
    in_g ip link add vx0 type vxlan id 42 local 192.0.2.1 remote 192.0.2.2 dstport 4789 dev gu udpcsum
    in_g ip link add br0 type bridge
    in_g ip link set gi master br0
    in_g ip link set vx0 master br0
    in_g ip link set vx0 up
    in_g ip link set br0 up
    if [ "${1:-}" = xdp ]; then
        local obj=$repo/crates/tep-sys/bpf/xdp_pass.o
        in_g ip link set dev gi xdpdrv obj "$obj" sec xdp
        in_g ip link set dev gu xdpdrv obj "$obj" sec xdp
    fi
    in_c ping -c 2 -W 1 -q 10.9.0.1 >/dev/null || { say "kernel: no ping"; return 1; }
}

# tcp_gbps STREAMS DIR: one iperf3 TCP run client → peer (fwd) or back (rev).
tcp_gbps() {
    local streams=$1 dir=$2 server r=()
    [ "$dir" = rev ] && r=(-R)
    in_p taskset -c "$other_cpu" iperf3 -s -1 -B 10.9.0.1 -p 5201 >/dev/null 2>&1 &
    server=$!
    sleep 0.3
    timeout -k 2 $((seconds + 10)) ip netns exec "$nc" taskset -c "$other_cpu" \
        iperf3 -c 10.9.0.1 -p 5201 -t "$seconds" -P "$streams" "${r[@]}" -J 2>/dev/null |
        python3 -c 'import json,sys
try: print("%.3f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e9))
except Exception: print("nan")'
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
}

results=$work/results.tsv
: >"$results"
rec() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$results"; }

# ------------------------------------------------------------------ rate
# worker_ticks: CPU ticks (user + system) of tep's worker threads, all
# together.
worker_ticks() {
    local t sum=0
    for t in /proc/"$tep_pid"/task/*; do
        case "$(cat "$t/comm" 2>/dev/null)" in
        tep-worker-*) sum=$((sum + $(awk '{print $14 + $15}' "$t/stat"))) ;;
        esac
    done
    echo "$sum"
}

# counter NAME: one of tep's I/O counters.
counter() {
    "$TEP" show counters --json --socket "$work/gw.sock" |
        python3 -c "import json,sys; print(json.load(sys.stdin)['io']['$1'])"
}

# mac NS DEV: an interface's MAC.
mac() { ip -n "$1" -o link show "$2" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p'; }

# frames PCAP DIR SIZE MODE: a pcap of 64 UDP flows' frames of SIZE-byte
# inner IP packets: as the client sends them (encap), or as the peer's
# VXLAN sends them, outer checksum per MODE (decap). Written byte by byte
# here, checksums included, so that nothing but python3 is needed.
frames() {
    python3 - "$1" "$2" "$3" "$4" "$(mac "$nc" c0)" "$(mac "$ng" gi)" "$(mac "$ng" gu)" \
        "$(mac "$np" pu)" "$(mac "$np" vx0)" <<'PYF'
import struct, sys
path, direction, size, mode, c0, gi, gu, pu, vx0 = sys.argv[1:]
size = int(size)
m = lambda s: bytes(int(x, 16) for x in s.split(":"))
def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
def ip4(src, dst, payload, proto=17):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0, 0x4000, 64, proto, 0,
                    bytes(src), bytes(dst))
    return h[:10] + struct.pack("!H", csum(h)) + h[12:] + payload
def udp(src, dst, sport, dport, data, zero=False):
    u = struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data
    if zero:
        return u
    pseudo = bytes(src) + bytes(dst) + struct.pack("!BBH", 0, 17, len(u))
    c = csum(pseudo + u) or 0xffff
    return u[:6] + struct.pack("!H", c) + u[8:]
out = open(path, "wb")
out.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
for flow in range(64):
    if direction == "encap":
        s, d = (10, 9, 0, 2), (10, 9, 0, 1)
        inner = ip4(s, d, udp(s, d, 10000 + flow, 9, bytes(size - 28)))
        frame = m(vx0) + m(c0) + b"\x08\x00" + inner
    else:
        s, d = (10, 9, 0, 1), (10, 9, 0, 2)
        inner = ip4(s, d, udp(s, d, 10000 + flow, 9, bytes(size - 28)))
        vxlan = struct.pack("!II", 0x08000000, 42 << 8) + m(c0) + m(vx0) + b"\x08\x00" + inner
        os_, od = (192, 0, 2, 2), (192, 0, 2, 1)
        outer = ip4(os_, od, udp(os_, od, 49152 + flow, 4789, vxlan, zero=(mode == "zero")))
        frame = m(gu) + m(pu) + b"\x08\x00" + outer
    out.write(struct.pack("<IIII", 0, 0, len(frame), len(frame)) + frame)
PYF
}

# flood SIZE DIR MODE: tep-bench flood of SIZE-byte inner packets into the
# gateway for $flood s, from the client (encap) or the peer (decap);
# prints "Mpps-per-worker-core Mpps-carried".
flood() {
    local size=$1 dir=$2 mode=$3 from dev event t0 t1 c0 c1 sent
    frames "$work/flood.pcap" "$dir" "$size" "$mode"
    if [ "$dir" = encap ]; then
        from=$nc dev=c0 event=inner_rx
    else
        from=$np dev=pu event=underlay_rx
    fi
    c0=$(counter $event) t0=$(worker_ticks)
    sent=$(ip netns exec "$from" taskset -c "$other_cpu" "$TEP_BENCH" flood --interface "$dev" \
        --pcap "$work/flood.pcap" --seconds "$flood" --json |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["frames"])')
    sleep 0.2
    c1=$(counter $event) t1=$(worker_ticks)
    python3 -c "
hz = $(getconf CLK_TCK)
n, cpu = $c1 - $c0, ($t1 - $t0) / hz
print('%.3f %.3f %.3f' % (n / cpu / 1e6 if cpu > 0 else float('nan'), n / $flood / 1e6, $sent / $flood / 1e6))"
}

if [[ ",$parts," == *,rate,* ]]; then
    say "== rate: tep-bench pipeline (vxlan, 64 and 1492 B, zero and full)"
    "$TEP_BENCH" pipeline --kinds vxlan --sizes 64,1492 --modes zero,full --families ipv4 --json \
        --samples "$([ "$quick" = 1 ] && echo 3 || echo 11)" >"$work/pipeline.json"
    for mode in zero full; do
        chain_up "$mode"
        rps
        tep_up "$mode"
        for size in 64 1492; do
            for dir in encap decap; do
                for r in $(seq "$reps"); do
                    read -r per_core achieved offered < <(flood "$size" "$dir" "$mode")
                    say "  $dir $size B $mode round $r: ${per_core} Mpps per worker core (${achieved} of ${offered} Mpps offered taken in)"
                    rec "rate/$dir/$size/$mode" per_core "$per_core"
                    rec "rate/$dir/$size/$mode" achieved "$achieved"
                done
            done
        done
        "$TEP" show runtime --socket "$work/gw.sock" >"$work/runtime-$mode.txt" 2>&1 || true
        chain_down
    done
fi

# ------------------------------------------------------------------- tcp
ovs_gbps() {  # runs the OVS script once: its TCP figures into results
    local out=$work/ovs
    PATH="$repo/examples/lib/netperf-shim:$PATH" VARIANTS=ovs-afxdp DUR=$seconds REPS=1 \
        RESULTS_DIR="$out" NS1="${tag}o1" NS2="${tag}o2" OVS_BASE="$work/ovsbase" \
        timeout -k 5 $((seconds * 6 + 120)) bash "$ovs_script" >"$work/ovs.log" 2>&1 || true
    [ -f "$out/results.tsv" ] || { say "  ovs-afxdp: no results (see $work/ovs.log)"; return 0; }
    awk -F'\t' '$4 == "gbps" { print $3, $5 }' "$out/results.tsv"
}

if [[ ",$parts," == *,tcp,* ]]; then
    for r in $(seq "$reps"); do
        for v in "${variant_list[@]}"; do
            if [ "$v" = ovs-afxdp ]; then
                while read -r t g; do
                    # tcp1-fwd -> streams 1 fwd
                    s=${t#tcp}; s=${s%%-*}; d=${t#*-}
                    say "  round $r ovs-afxdp $s stream(s) $d: $g Gbit/s"
                    rec "tcp/ovs-afxdp/$s/$d" gbps "$g"
                done < <(ovs_gbps)
                continue
            fi
            chain_up full
            case "$v" in
            tep) tep_up full ;;
            tep-rps) rps; tep_up full ;;
            kernel) kernel_up ;;
            kernel-xdp) kernel_up xdp ;;
            esac
            for s in 1 4; do
                for d in fwd rev; do
                    g=$(tcp_gbps "$s" "$d")
                    say "  round $r $v $s stream(s) $d: $g Gbit/s"
                    rec "tcp/$v/$s/$d" gbps "$g"
                done
            done
            if [ "$v" = tep-rps ]; then
                "$TEP" show runtime --socket "$work/gw.sock" >"$work/runtime-tcp.txt" 2>&1 || true
            fi
            chain_down
        done
    done
fi

python3 - "$results" "$work/pipeline.json" "$json" "$reps" <<'PY'
import json, math, statistics, sys, collections
tsv, pipe_path, as_json, reps = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
d = collections.defaultdict(list)
for line in open(tsv):
    key, metric, val = line.rstrip("\n").split("\t")
    try:
        x = float(val)
    except ValueError:
        continue
    if not math.isnan(x):
        d[(key, metric)].append(x)
med = lambda k, m: statistics.median(d[(k, m)]) if d.get((k, m)) else float("nan")
pipeline = {}
try:
    for r in json.load(open(pipe_path))["rows"]:
        pipeline[(r["direction"], r["size"], r["mode"])] = r["ns_per_packet"]
except Exception:
    pass
out = {"rate": [], "tcp": []}
for dir in ("encap", "decap"):
    for size in (64, 1492):
        for mode in ("zero", "full"):
            k = f"rate/{dir}/{size}/{mode}"
            if (k, "per_core") not in d:
                continue
            core = med(k, "per_core")
            ns = pipeline.get((dir, size, mode), float("nan"))
            out["rate"].append({
                "dir": dir, "size": size, "mode": mode,
                "mpps_per_core": core, "mpps_carried": med(k, "achieved"),
                "pipeline_ns": ns, "pipeline_mpps": 1e3 / ns if ns == ns and ns > 0 else float("nan"),
                "io_ns": (1e3 / core - ns) if core == core and core > 0 and ns == ns else float("nan"),
            })
variants = []
for (k, m) in d:
    if k.startswith("tcp/"):
        v = k.split("/")[1]
        if v not in variants:
            variants.append(v)
for v in variants:
    row = {"variant": v}
    for s in ("1", "4"):
        for dr in ("fwd", "rev"):
            row[f"{s}{dr}"] = med(f"tcp/{v}/{s}/{dr}", "gbps")
    out["tcp"].append(row)
if as_json:
    print(json.dumps(out, default=lambda x: None))
    sys.exit(0)
if out["rate"]:
    print(f"\nPackets per second per worker core, VXLAN/IPv4 to a kernel VXLAN peer (median of {reps}):")
    print(f"| path | size | checksum | Mpps per worker core | Mpps carried | tep-bench pipeline ns (Mpps) | AF_XDP I/O ns per packet |")
    print("|---|---|---|---|---|---|---|")
    for r in out["rate"]:
        print(f"| {r['dir']} | {r['size']} B | {r['mode']} | {r['mpps_per_core']:.2f} | {r['mpps_carried']:.2f} | "
              f"{r['pipeline_ns']:.0f} ({r['pipeline_mpps']:.1f}) | {r['io_ns']:.0f} |")
if out["tcp"]:
    by = {r["variant"]: r for r in out["tcp"]}
    print(f"\nTCP through the gateway, Gbit/s (iperf3, median of {reps}; fwd client → peer, rev back):")
    cols = ["1fwd", "1rev", "4fwd", "4rev"]
    print("| variant | 1 stream fwd | 1 stream rev | 4 streams fwd | 4 streams rev | vs kernel (1 fwd) | vs ovs-afxdp (fwd/rev, 1 stream) |")
    print("|---|---|---|---|---|---|---|")
    for r in out["tcp"]:
        k = by.get("kernel", {}).get("1fwd", float("nan"))
        o = by.get("ovs-afxdp", {})
        vs_k = r["1fwd"] / k if k == k and k > 0 else float("nan")
        vs_o = "/".join(
            f"{r[c] / o[c]:.2f}" if o.get(c, float("nan")) == o.get(c) and o.get(c, 0) > 0 else "n/a"
            for c in ("1fwd", "1rev"))
        print(f"| {r['variant']} | " + " | ".join(f"{r[c]:.2f}" for c in cols) + f" | {vs_k:.2f} | {vs_o} |")
PY
if [ -f "$work/runtime-tcp.txt" ]; then
    echo
    echo "tep show runtime (tep-rps, TCP, last round):"
    cat "$work/runtime-tcp.txt"
fi
# A variant that carried nothing is a failure.
if awk -F'\t' '$2 == "gbps" && ($3 == "nan" || $3 + 0 == 0) { bad = 1 } END { exit !bad }' "$results"; then
    echo "bench-gateway.sh: a variant carried no traffic" >&2
    exit 1
fi
