#!/usr/bin/env bash
# bench-tunnel.sh: tep's host mode against the Linux kernel's VXLAN, over the
# same veth pair, in one run.
#
#   sudo ./examples/bench-tunnel.sh [--quick] [--json] [--rr-tool sockperf|netperf|python] [--cpus C,S]
#                                   [--paths P,...]
#
# Two network namespaces joined by one veth pair. One path at a time
# between them: the kernel's VXLAN (udpcsum: outer UDP checksums on, both
# ends kernel), tep VXLAN in each checksum mode (zero, full, lco, offload,
# remote), tep GUE (full), and tep VXLAN full with the workers busy-polling
# for 200 µs before they sleep (host.busy_poll_us = 200). Through each path:
#   - iperf3 TCP throughput with 1 and with 4 streams, 10 s runs, with
#     the sender's TCP retransmits and the UDP datagrams the receiving
#     kernel dropped (RcvbufErrors, InErrors; tep's udp_receive_buffer_full);
#   - TCP request/response latency (64-byte request and response, one at a
#     time) p50 and p99 of the round trip over 5 s, with sockperf
#     (apt-get install sockperf), else netperf TCP_RR, else a small python3
#     ping-pong; the table says which.
# Three rounds over all paths; each figure is the median of its three
# (--quick: one round, 3 s transfers, 2 s of ping-pong). About twelve
# minutes (--quick: under two).
# Client and server are pinned to different CPUs (default 0 and 1). Prints
# the table, the ratios tep/kernel per tep row, and tep's `show runtime`
# (per-node clocks) for VXLAN full. --json prints one JSON object instead.
# --paths runs some of the paths only (kernel-vxlan, tep-vxlan-zero,
# tep-vxlan-full, tep-vxlan-lco, tep-vxlan-offload, tep-vxlan-remote,
# tep-gue-full, tep-vxlan-full-poll (busy polling 200 µs),
# tep-vxlan-full-sleep (no adaptive polling), and tep with the kernel's VXLAN as
# the peer: tep-to-kernel-{full,zero,full6,zero6} (tep on a sends),
# kernel-to-tep-{full,zero,full6,zero6} (tep on b receives); full pairs
# with udpcsum, zero with noudpcsum, the 6 ones are over IPv6, zero6 with
# udp6zerocsumtx/rx; a -rps suffix, e.g. tep-to-kernel-full6-rps, sets
# host.uplink_cpus to the server's CPU);
# ratios need kernel-vxlan among them.
#
# Note: on veth, a checksum the sender leaves partial is not computed in
# software: the peer trusts CHECKSUM_PARTIAL, for the kernel and tep alike. In
# host mode full/lco/offload all mean "the kernel writes the outer
# checksum", so those rows measure the same I/O path.
#
# Environment: TEP=/path/to/tep skips the build. Exit 1 if a path did not
# pass traffic, 2 for bad usage or a missing tool.
set -euo pipefail
script=bench-tunnel.sh
# shellcheck source=lib/two-hosts.sh
. "$(dirname "$0")/lib/two-hosts.sh"

quick=0
json=0
rr_tool=auto
cpus=""
all_paths="kernel-vxlan,tep-vxlan-zero,tep-vxlan-full,tep-vxlan-lco,tep-vxlan-offload,tep-vxlan-remote,tep-gue-full,tep-vxlan-full-poll,tep-vxlan-full-sleep,tep-to-kernel-full,kernel-to-tep-full,tep-to-kernel-zero,kernel-to-tep-zero,tep-to-kernel-full6,kernel-to-tep-full6,tep-to-kernel-zero6,kernel-to-tep-zero6,tep-to-kernel-full-rps,tep-to-kernel-full6-rps,tep-to-kernel-zero6-rps"
path_arg=$all_paths
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=1 ;;
    --json) json=1 ;;
    --rr-tool) rr_tool=${2:?--rr-tool needs a name}; shift ;;
    --rr-tool=*) rr_tool=${1#*=} ;;
    --cpus) cpus=${2:?--cpus needs C,S}; shift ;;
    --cpus=*) cpus=${1#*=} ;;
    --paths) path_arg=${2:?--paths needs a list}; shift ;;
    --paths=*) path_arg=${1#*=} ;;
    -h | --help) usage 0 ;;
    *) echo "bench-tunnel.sh: unknown option $1" >&2; usage 2 ;;
    esac
    shift
done
IFS=, read -r -a paths <<<"$path_arg"
for p in "${paths[@]}"; do one_of path "$p" "$all_paths"; done
if [ "$quick" = 1 ]; then
    seconds=3 reps=1 rr_seconds=2
else
    seconds=10 reps=3 rr_seconds=5
fi

preflight ip:iproute2 ping:iputils-ping iperf3:iperf3 python3:python3 taskset:util-linux timeout:coreutils
if [ "$rr_tool" = auto ]; then
    if command -v sockperf >/dev/null; then
        rr_tool=sockperf
    elif command -v netperf >/dev/null && command -v netserver >/dev/null; then
        rr_tool=netperf
    else
        rr_tool=python
        echo "note: sockperf not found (sudo apt-get install sockperf); latency from a python3 ping-pong" >&2
    fi
fi
case "$rr_tool" in
sockperf) command -v sockperf >/dev/null || { echo "bench-tunnel.sh: sockperf is not installed" >&2; exit 2; } ;;
netperf) command -v netperf >/dev/null && command -v netserver >/dev/null ||
    { echo "bench-tunnel.sh: netperf/netserver are not installed" >&2; exit 2; } ;;
python) ;;
*) echo "bench-tunnel.sh: --rr-tool is sockperf, netperf or python" >&2; exit 2 ;;
esac

# Client and server on different CPUs, so neither steals the other's time.
if [ -z "$cpus" ]; then
    if [ "$(nproc)" -gt 1 ]; then cpus=0,1; else cpus=0,0; fi
fi
IFS=, read -r cli_cpu srv_cpu <<<"$cpus"

find_tep
two_hosts "tepbench$$"
say() { echo "$@" >&2; }

dst=10.9.0.2

# tep_config KIND MODE SIDE [LINE]: one side's tep.toml (side 1 = a,
# 2 = b), with LINE (a polling setting) in [host] when given.
tep_config() {
    local kind=$1 mode=$2 side=$3 line=${4:-}
    echo "[host]"
    if [ -n "$line" ]; then echo "$line"; fi
    if [ "$kind" = vxlan ]; then
        printf 'tap = "tepbench1"\ntap_addresses = ["10.9.0.%s/24"]\n' "$side"
    else
        printf 'tun = "tepbench0"\ntun_addresses = ["10.9.0.%s/24"]\n' "$side"
    fi
    printf 'control = "%s/%s.sock"\n\n' "$work" "$side"
    # MODE full6 / zero6: over IPv6 (zero with both ends' opt-in, RFC 6935).
    local net=192.0.2. csum=$mode
    case "$mode" in
    *6) net=2001:db8:: csum=${mode%6} ;;
    esac
    printf '[[tunnel]]\nname = "bench"\nkind = "%s"\nlocal = "%s%s"\nremote = "%s%s"\nchecksum = "%s"\n' \
        "$kind" "$net" "$side" "$net" "$((3 - side))" "$csum"
    if [ "$mode" = zero6 ]; then printf 'zero_checksum_tx = true\nzero_checksum_rx = true\n'; fi
    if [ "$kind" = vxlan ]; then echo "vni = 42"; else echo 'inner_prefixes = ["10.9.0.0/24"]'; fi
    # Remote checksum offload is opt-in on the receiver.
    if [ "$mode" = remote ]; then echo "remote_checksum_rx = true"; fi
}

# path_up NAME: brings up the path; path_down NAME takes it away.
# kernel_vxlan_side SIDE CSUM [NET]: the kernel's VXLAN in namespace SIDE
# (1 = a), CSUM its checksum options, over NET (192.0.2. or 2001:db8::).
kernel_vxlan_side() {
    local side=$1 csum=$2 net=${3:-192.0.2.} ns=$ns_a dev=va
    if [ "$side" = 2 ]; then ns=$ns_b dev=vb; fi
    # shellcheck disable=SC2086 # CSUM: several options
    ip netns exec "$ns" ip link add vx0 type vxlan id 42 local "$net$side" \
        remote "$net$((3 - side))" dstport 4789 $csum dev "$dev"
    ip netns exec "$ns" ip addr add "10.9.0.$side/24" dev vx0
    ip netns exec "$ns" ip link set vx0 up
}

path_up() {
    case "$1" in
    tep-to-kernel-* | kernel-to-tep-*)
        # tep on one side, the kernel's VXLAN (udpcsum for full, noudpcsum
        # for zero; over IPv6 its default for full6, udp6zerocsumtx/rx for
        # zero6) on the other.
        # A "-rps" path: tep's uplink hands its kernel work to the server's
        # CPU (host.uplink_cpus).
        local name=$1 line=""
        case "$name" in *-rps) name=${name%-rps} line="uplink_cpus = [$srv_cpu]" ;; esac
        local mode=${name##*-} csum=udpcsum net=192.0.2. tep_side=1
        case "$mode" in
        zero) csum=noudpcsum ;;
        full6) csum="" net=2001:db8:: ;;
        zero6) csum="udp6zerocsumtx udp6zerocsumrx" net=2001:db8:: ;;
        esac
        case "$name" in kernel-to-tep-*) tep_side=2 ;; esac
        local ns=$ns_a
        [ "$tep_side" = 2 ] && ns=$ns_b
        kernel_vxlan_side $((3 - tep_side)) "$csum" "$net"
        tep_config vxlan "$mode" "$tep_side" "$line" >"$work/$tep_side.toml"
        tep_start "$tep_side" "$ns"
        ;;
    kernel-vxlan)
        local side ns
        for side in 1 2; do
            if [ "$side" = 1 ]; then ns=$ns_a; else ns=$ns_b; fi
            local dev=va
            [ "$side" = 2 ] && dev=vb
            ip netns exec "$ns" ip link add vx0 type vxlan id 42 local "192.0.2.$side" \
                remote "192.0.2.$((3 - side))" dstport 4789 udpcsum dev "$dev"
            ip netns exec "$ns" ip addr add "10.9.0.$side/24" dev vx0
            ip netns exec "$ns" ip link set vx0 up
        done
        ;;
    tep-*)
        local rest=${1#tep-} line=""
        # A "-poll" path: the workers busy-poll for 200 µs after each
        # packet; a "-sleep" path: they sleep whenever nothing is queued
        # (no adaptive polling).
        case "$rest" in
        *-poll) rest=${rest%-poll} line="busy_poll_us = 200" ;;
        *-sleep) rest=${rest%-sleep} line="adaptive_poll_us = 0" ;;
        esac
        local kind=${rest%-*} mode=${rest##*-}
        tep_config "$kind" "$mode" 1 "$line" >"$work/1.toml"
        tep_config "$kind" "$mode" 2 "$line" >"$work/2.toml"
        tep_start 1 "$ns_a" && tep_start 2 "$ns_b"
        ;;
    esac
}
path_down() {
    case "$1" in
    tep-to-kernel-* | kernel-to-tep-*)
        tep_stop_all
        in_a ip link del vx0 2>/dev/null || true
        in_b ip link del vx0 2>/dev/null || true
        ;;
    kernel-vxlan)
        in_a ip link del vx0 2>/dev/null || true
        in_b ip link del vx0 2>/dev/null || true
        ;;
    tep-*) tep_stop_all ;;
    esac
}

# wait_listen PORT: until something in b listens on TCP PORT (2.5 s at most).
wait_listen() {
    for _ in $(seq 50); do
        in_b ss -Hltn "sport = :$1" | grep -q . && return 0
        sleep 0.05
    done
    return 1
}

# stop_server PID: the server started in the background is gone.
stop_server() {
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# udp_drops: "RCVBUF INERRORS TEP": the kernel's UDP receive-buffer
# overflows and all its UDP receive errors (IPv4 and IPv6, both
# namespaces added up), and what the running tep daemons count as
# udp_receive_buffer_full (the same kernel counter as tep reads it for its
# own namespace; 0 without a daemon).
udp_drops() {
    local ns side tep=0 n
    {
        for ns in "$ns_a" "$ns_b"; do ip netns exec "$ns" cat /proc/net/snmp /proc/net/snmp6; done
    } | python3 -c '
import sys
rcvbuf = errors = 0
lines = sys.stdin.read().splitlines()
heads = [l.split() for l in lines if l.startswith("Udp:")]
for names, values in zip(heads[0::2], heads[1::2]):
    kv = dict(zip(names[1:], map(int, values[1:])))
    rcvbuf += kv.get("RcvbufErrors", 0)
    errors += kv.get("InErrors", 0)
for l in lines:
    f = l.split()
    if len(f) == 2 and f[0] == "Udp6RcvbufErrors":
        rcvbuf += int(f[1])
    if len(f) == 2 and f[0] == "Udp6InErrors":
        errors += int(f[1])
print(rcvbuf, errors, end=" ")'
    for side in 1 2; do
        n=$(tep_ctl "$side" show counters --json 2>/dev/null |
            python3 -c 'import json, sys; print(json.load(sys.stdin)["kernel"]["udp_receive_buffer_full"])' 2>/dev/null) || n=0
        tep=$((tep + ${n:-0}))
    done
    echo "$tep"
}

# iperf_gbps STREAMS: one bounded iperf3 TCP run a→b; "GBPS RETRANSMITS
# RCVBUF INERRORS TEP" (the last three: what udp_drops grew by over the
# run), or "ERR: why".
iperf_gbps() {
    local streams=$1 server
    in_b taskset -c "$srv_cpu" iperf3 -s -1 -B "$dst" -p 5201 >/dev/null 2>&1 &
    server=$!
    wait_listen 5201 || true
    local before after
    before=$(udp_drops)
    # --foreground: Ctrl-C reaches iperf3 too.
    timeout --foreground -k 2 $((seconds + 10)) \
        ip netns exec "$ns_a" taskset -c "$cli_cpu" iperf3 -c "$dst" -p 5201 -t "$seconds" -P "$streams" -J \
        >"$work/iperf.json" 2>/dev/null || true
    stop_server "$server"
    after=$(udp_drops)
    python3 - "$work/iperf.json" "$before" "$after" <<'EOF'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception:
    print("ERR: iperf3 gave no JSON")
    sys.exit()
if "error" in r:
    print("ERR: " + r["error"])
else:
    grew = [int(b) - int(a) for a, b in zip(sys.argv[2].split(), sys.argv[3].split())]
    print("%.3f %d %s" % (r["end"]["sum_received"]["bits_per_second"] / 1e9,
                          r["end"]["sum_sent"].get("retransmits", -1), " ".join(map(str, grew))))
EOF
}

# A TCP ping-pong in python3, for when neither sockperf nor netperf is
# there: 64-byte request, 64-byte response, one at a time, TCP_NODELAY.
cat >"$work/pingpong.py" <<'EOF'
import socket, sys, time
mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
SIZE = 64
def recv_all(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf
if mode == "server":
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((host, port))
    l.listen(1)
    c, _ = l.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        m = recv_all(c, SIZE)
        if m is None:
            break
        c.sendall(m)
else:
    seconds = float(sys.argv[4])
    s = socket.create_connection((host, port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg = b"x" * SIZE
    rtts = []
    warm = time.monotonic() + 0.2
    end = warm + seconds
    while True:
        t0 = time.perf_counter_ns()
        s.sendall(msg)
        if recv_all(s, SIZE) is None:
            break
        t1 = time.perf_counter_ns()
        if t0 / 1e9 > end:
            break
        if time.monotonic() >= warm:
            rtts.append((t1 - t0) / 1000)
    s.close()
    rtts.sort()
    pick = lambda p: rtts[min(len(rtts) - 1, int(p * len(rtts)))]
    print("%.1f %.1f" % (pick(0.50), pick(0.99)))
EOF

# rr_us: TCP request/response round trip a→b→a, "p50 p99" in µs, or "ERR".
rr_us() {
    local server out
    case "$rr_tool" in
    sockperf)
        in_b taskset -c "$srv_cpu" sockperf server --tcp -i "$dst" -p 11111 >/dev/null 2>&1 &
        server=$!
        wait_listen 11111 || true
        out=$(timeout --foreground -k 2 $((rr_seconds + 15)) ip netns exec "$ns_a" taskset -c "$cli_cpu" \
            sockperf ping-pong --tcp -i "$dst" -p 11111 -m 64 -t "$rr_seconds" --full-rtt 2>&1 || true)
        stop_server "$server"
        # "---> percentile 50.000 =   23.456" (µs).
        local p50 p99
        p50=$(sed -n 's/.*percentile 50\.000 = *\([0-9.]*\).*/\1/p' <<<"$out")
        p99=$(sed -n 's/.*percentile 99\.000 = *\([0-9.]*\).*/\1/p' <<<"$out")
        if [ -n "$p50" ] && [ -n "$p99" ]; then echo "$p50 $p99"; else echo ERR; fi
        ;;
    netperf)
        in_b taskset -c "$srv_cpu" netserver -D -L "$dst" -p 12865 >/dev/null 2>&1 &
        server=$!
        wait_listen 12865 || true
        # Percentiles come from netperf's omni output selectors (µs).
        out=$(timeout --foreground -k 2 $((rr_seconds + 15)) ip netns exec "$ns_a" taskset -c "$cli_cpu" \
            netperf -H "$dst" -p 12865 -t TCP_RR -l "$rr_seconds" -- -r 64,64 -o P50_LATENCY,P99_LATENCY 2>&1 || true)
        stop_server "$server"
        tail -n 1 <<<"$out" | awk -F, 'NF == 2 && $1 + 0 > 0 { print $1, $2; ok = 1 } END { if (!ok) print "ERR" }'
        ;;
    python)
        in_b taskset -c "$srv_cpu" python3 "$work/pingpong.py" server "$dst" 11111 >/dev/null 2>&1 &
        server=$!
        wait_listen 11111 || true
        out=$(timeout --foreground -k 2 $((rr_seconds + 15)) ip netns exec "$ns_a" taskset -c "$cli_cpu" \
            python3 "$work/pingpong.py" client "$dst" 11111 "$rr_seconds" 2>/dev/null || true)
        stop_server "$server"
        if [ -n "$out" ]; then echo "$out"; else echo ERR; fi
        ;;
    esac
}

failed=0
started=$SECONDS
: >"$work/results"
declare -A dead=()
say "bench: ${#paths[@]} paths, ${reps} round(s) of iperf3 ${seconds} s (1 and 4 streams) and $rr_tool ${rr_seconds} s; client CPU $cli_cpu, server CPU $srv_cpu"
# Rounds: every path once per round, so that a slow spell of a shared
# machine spreads over all rows instead of spoiling one; medians over rounds.
for round in $(seq "$reps"); do
    [ "$reps" -gt 1 ] && say "round $round of $reps"
    for path in "${paths[@]}"; do
        [ -n "${dead[$path]:-}" ] && continue
        printf '  %-24s ' "$path" >&2
        if ! path_up "$path"; then
            path_down "$path"
            echo "$path fail" >>"$work/results"
            say "FAIL: did not come up"
            dead[$path]=1 failed=1
            continue
        fi
        # L2 paths resolve the peer through the tunnel first; a path that
        # cannot carry ping is not measured.
        if ! in_a ping -c 3 -i 0.2 -W 2 -w 5 "$dst" >/dev/null 2>&1; then
            say "FAIL: no ping through the tunnel"
            path_down "$path"
            echo "$path fail" >>"$work/results"
            dead[$path]=1 failed=1
            continue
        fi
        one=$(iperf_gbps 1)
        four=$(iperf_gbps 4)
        rr=$(rr_us)
        say "$(cut -d' ' -f1 <<<"$one") / $(cut -d' ' -f1 <<<"$four") Gbit/s, retransmits $(cut -s -d' ' -f2 <<<"$one") / $(cut -s -d' ' -f2 <<<"$four"), rcvbuf full $(cut -s -d' ' -f3 <<<"$one") / $(cut -s -d' ' -f3 <<<"$four"), rr $rr µs"
        # One line per path and round: name, status, key=value for python
        # (a transfer's figures joined by commas).
        echo "$path ok 1=${one// /,} 4=${four// /,} rr=${rr// /,}" >>"$work/results"
        # The per-node clocks of the last round's VXLAN full daemons.
        if [ "$path" = tep-vxlan-full ] && [ "$round" = "$reps" ]; then
            for side in 1 2; do
                tep_ctl "$side" show runtime >"$work/runtime-$side.txt" 2>&1 || true
                tep_ctl "$side" show runtime --json >"$work/runtime-$side.json" 2>/dev/null ||
                    echo null >"$work/runtime-$side.json"
            done
        fi
        path_down "$path"
    done
done

python3 - "$work" "$json" "$rr_tool" "$seconds" "$reps" "$rr_seconds" "$cpus" "$((SECONDS - started))" <<'EOF' || failed=1
import json, statistics, sys
work, as_json, tool, seconds, reps, rr_seconds, cpus, took = sys.argv[1:]
by_path = {}
for line in open(f"{work}/results"):
    f = line.split()
    r = by_path.setdefault(f[0], {"ok": True, "1": [], "4": [], "p50": [], "p99": [],
                                  "retr1": [], "retr4": [], "rcvbuf1": [], "rcvbuf4": [],
                                  "inerr1": [], "inerr4": [], "tep1": [], "tep4": []})
    if f[1] != "ok":
        r["ok"] = False
        continue
    kv = dict(x.split("=", 1) for x in f[2:])
    for k in ("1", "4"):
        if not kv[k].startswith("ERR"):
            v = kv[k].split(",")
            r[k].append(float(v[0]))
            if len(v) == 5:
                for name, x in zip(("retr", "rcvbuf", "inerr", "tep"), v[1:]):
                    r[name + k].append(int(x))
    rr = kv["rr"].split(",")
    if len(rr) == 2:
        r["p50"].append(float(rr[0]))
        r["p99"].append(float(rr[1]))
med = lambda v: statistics.median(v) if v else None
rows = []
bad = False
for path, r in by_path.items():
    row = {"path": path, "ok": r["ok"]}
    if r["ok"]:
        row.update({
            "gbps_1": med(r["1"]), "gbps_4": med(r["4"]),
            "rr_p50_us": med(r["p50"]), "rr_p99_us": med(r["p99"]),
            "retransmits_1": med(r["retr1"]), "retransmits_4": med(r["retr4"]),
            "udp_rcvbuf_errors_1": med(r["rcvbuf1"]), "udp_rcvbuf_errors_4": med(r["rcvbuf4"]),
            "udp_in_errors_1": med(r["inerr1"]), "udp_in_errors_4": med(r["inerr4"]),
            "tep_udp_receive_buffer_full_1": med(r["tep1"]), "tep_udp_receive_buffer_full_4": med(r["tep4"]),
            "samples": {"gbps_1": r["1"], "gbps_4": r["4"], "rr_p50_us": r["p50"], "rr_p99_us": r["p99"],
                        "retransmits_1": r["retr1"], "retransmits_4": r["retr4"],
                        "udp_rcvbuf_errors_1": r["rcvbuf1"], "udp_rcvbuf_errors_4": r["rcvbuf4"],
                        "udp_in_errors_1": r["inerr1"], "udp_in_errors_4": r["inerr4"],
                        "tep_udp_receive_buffer_full_1": r["tep1"], "tep_udp_receive_buffer_full_4": r["tep4"]},
        })
        # A transfer that failed in any round counts as a failure.
        if len(r["1"]) < int(reps) or len(r["4"]) < int(reps):
            bad = True
    else:
        bad = True
    rows.append(row)
kernel = next((r for r in rows if r["path"] == "kernel-vxlan" and r["ok"]), None)
keys = ["gbps_1", "gbps_4", "rr_p50_us", "rr_p99_us"]
for r in rows:
    if r["path"].startswith("tep-") and kernel and r["ok"]:
        r["ratio"] = {k: (round(r[k] / kernel[k], 3) if r.get(k) and kernel.get(k) else None) for k in keys}
# tep sending to the kernel's VXLAN against the kernel sending to tep,
# per checksum mode (the issue's interop figure), and zero against full.
by_path = {r["path"]: r for r in rows if r["ok"]}
def pair_ratio(num, den):
    a, b = by_path.get(num), by_path.get(den)
    if not a or not b:
        return None
    return {k: (round(a[k] / b[k], 3) if a.get(k) and b.get(k) else None) for k in ("gbps_1", "gbps_4")}
pairs = {f"tep-to-kernel-{m} / kernel-to-tep-{m}": pair_ratio(f"tep-to-kernel-{m}", f"kernel-to-tep-{m}")
         for m in ("full", "zero", "full6", "zero6")}
for m in ("full", "full6", "zero6"):
    pairs[f"tep-to-kernel-{m}-rps / kernel-to-tep-{m}"] = pair_ratio(f"tep-to-kernel-{m}-rps", f"kernel-to-tep-{m}")
pairs["tep-vxlan-zero / tep-vxlan-full"] = pair_ratio("tep-vxlan-zero", "tep-vxlan-full")
pairs = {k: v for k, v in pairs.items() if v}
def runtime(side):
    try:
        return json.load(open(f"{work}/runtime-{side}.json"))
    except Exception:
        return None
if as_json == "1":
    print(json.dumps({
        "rr_tool": tool, "iperf3_seconds": int(seconds), "rounds": int(reps),
        "rr_seconds": int(rr_seconds), "cpus": cpus, "seconds_total": int(took),
        "rows": rows, "pair_ratios": pairs,
        "runtime_vxlan_full": {"a": runtime(1), "b": runtime(2)},
    }, indent=1))
    sys.exit(1 if bad else 0)
fmt = lambda v, p: "-" if v is None else f"{v:.{p}f}"
print()
print(f"{'path':<24} {'1-stream Gbit/s':>15} {'4-stream Gbit/s':>15} {'RR p50 µs':>10} {'RR p99 µs':>10}")
for r in rows:
    if not r["ok"]:
        print(f"{r['path']:<24} {'FAILED':>15}")
        continue
    print(f"{r['path']:<24} {fmt(r['gbps_1'], 2):>15} {fmt(r['gbps_4'], 2):>15} "
          f"{fmt(r['rr_p50_us'], 1):>10} {fmt(r['rr_p99_us'], 1):>10}")
print()
print("TCP retransmits and UDP receive drops per transfer (medians)")
print(f"{'path':<24} {'retransmits 1/4':>17} {'UDP rcvbuf 1/4':>15} {'UDP errors 1/4':>15} {'tep rcvbuf_full 1/4':>20}")
for r in rows:
    if not r["ok"]:
        continue
    pair = lambda k, p=0: f"{fmt(r[k + '_1'], p)}/{fmt(r[k + '_4'], p)}"
    tep = pair("tep_udp_receive_buffer_full") if r["path"].startswith(("tep-", "kernel-to-tep")) else "-"
    print(f"{r['path']:<24} {pair('retransmits'):>17} {pair('udp_rcvbuf_errors'):>15} "
          f"{pair('udp_in_errors'):>15} {tep:>20}")
if kernel:
    print()
    print("tep / kernel-vxlan (throughput: higher is better; latency: lower is better)")
    print(f"{'path':<24} {'1-stream':>15} {'4-stream':>15} {'RR p50':>10} {'RR p99':>10}")
    for r in rows:
        if "ratio" in r:
            q = r["ratio"]
            print(f"{r['path']:<24} {fmt(q['gbps_1'], 2):>15} {fmt(q['gbps_4'], 2):>15} "
                  f"{fmt(q['rr_p50_us'], 2):>10} {fmt(q['rr_p99_us'], 2):>10}")
if pairs:
    print()
    print("side by side (throughput ratio)")
    for name, q in pairs.items():
        print(f"{name:<46} {fmt(q['gbps_1'], 2):>8} {fmt(q['gbps_4'], 2):>8}")
print()
print("Retransmits: iperf3's (the sender's TCP); UDP rcvbuf/errors: the kernel's RcvbufErrors and "
      "InErrors (IPv4 + IPv6) of both namespaces over the transfer; tep rcvbuf_full: tep show "
      "counters' udp_receive_buffer_full of the daemons (the same kernel counter, as tep reports it).")
print(f"iperf3 TCP a→b {seconds} s; RR: {tool}, 64-byte request/response for {rr_seconds} s, "
      f"round-trip percentiles; medians of {reps} round(s), paths interleaved; "
      f"client/server CPUs {cpus}; {took} s in all.")
sys.exit(1 if bad else 0)
EOF

if [ "$json" != 1 ]; then
    for side in 1 2; do
        if [ -s "$work/runtime-$side.txt" ]; then
            echo
            if [ "$side" = 1 ]; then
                echo "tep show runtime, VXLAN full, side a (sends the iperf3 data: encap):"
            else
                echo "tep show runtime, VXLAN full, side b (receives it: decap):"
            fi
            cat "$work/runtime-$side.txt"
        fi
    done
fi
exit "$failed"
