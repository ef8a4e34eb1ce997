#!/usr/bin/env bash
# soak.sh: two tep daemons carrying every tunnel kind for a while, under
# load, garbage and reloads; then checks that nothing leaked, crashed or
# went uncounted.
#
#   sudo ./examples/soak.sh [MINUTES]      (default 10; 1 for a quick look)
#
# Two network namespaces joined by a veth pair (lib/two-hosts.sh), one
# `tep run` in each with ten tunnels between them: gue, gue (variant 1),
# fou-ipip, fou-sit, fou-gre, gue-gre, gre (GRE-in-UDP), gtpu on the TUN,
# each routing its own inner prefix, and vxlan (every MAC) and geneve (the
# peer's MAC) on the TAP. For MINUTES:
#   - iperf3 TCP, 2 streams at 100 Mbit/s each, through one tunnel after
#     another (20 s each, rotating over the kinds);
#   - ping through every tunnel, 5 a second each;
#   - garbage (examples/lib/garbage.py) at every tunnel port of both
#     daemons, 200 datagrams a second: truncated headers, headers with an
#     unknown VNI/TEID/key or a bad version, and random bytes from an
#     address that is no tunnel's peer; each one counted by what it is;
#   - a reload every 30 s, adding or removing an eleventh tunnel (and its
#     route).
# Then everything stops, the counters settle, and the checks:
#   - no crash: both daemons answered every reload and exit 0 on SIGTERM;
#   - memory: each daemon's RSS grew by at most 1 MiB after the first
#     minute (sampled every 5 s; the median of the last minute against
#     that of the second: a sender's RSS swings by about a MiB with the
#     traffic and comes back);
#   - accounting, per daemon: every datagram its sockets received was
#     delivered through a tunnel or dropped under a named reason
#     (udp_rx = Σ rx_packets + receive-side drops);
#   - accounting, per direction: what one side's tunnels sent and the
#     other's did not deliver is in the receiver's drops (less the
#     garbage) or its kernel's UDP counters (NoPorts, InErrors);
#   - garbage: every garbage datagram sent is in the receiver's drops
#     (their total less what real traffic dropped, which is 0), by reason.
# Prints the figures and PASS or FAIL; exit 0 on PASS, 1 on FAIL, 2 for bad
# usage or a missing tool. Run it under nice on a shared machine: RSS and
# the accounting do not depend on timing.
#
# Environment: TEP=/path/to/tep skips the build.
set -euo pipefail
script=soak.sh
# shellcheck source=lib/two-hosts.sh
. "$(dirname "$0")/lib/two-hosts.sh"

minutes=10
case "${1:-}" in
-h | --help) usage 0 ;;
"") ;;
*[!0-9]* | 0) echo "soak.sh: MINUTES is a whole number from 1" >&2; usage 2 ;;
*) minutes=$1 ;;
esac

preflight ip:iproute2 ping:iputils-ping iperf3:iperf3 python3:python3

here=$(cd "$(dirname "$0")" && pwd)
find_tep
two_hosts "tepsoak$$"
say() { echo "[$(date +%T)] $*" >&2; }

# Strangers: addresses on each side that are no tunnel's peer.
in_a ip addr add 192.0.2.3/24 dev va
in_b ip addr add 192.0.2.4/24 dev vb

# The TAP MACs are fixed, so that each side's geneve tunnel can claim the
# other's (vxlan takes every other MAC: broadcasts, ARP requests).
mac() { printf '02:00:00:00:0a:0%s' "$1"; }

# L3 tunnels: "name kind port inner-prefix extra" (inner .1 on a, .2 on b).
l3=(
    "gue gue 6080 10.1.0.0/24 -"
    "gue1 gue 6083 10.2.0.0/24 gue_variant=1"
    "ipip fou-ipip 5555 10.3.0.0/24 -"
    "sit fou-sit 5556 fd04::/64 -"
    "fgre fou-gre 5557 10.5.0.0/24 key=7"
    "ggre gue-gre 6082 10.6.0.0/24 key=8"
    "gre gre 4754 10.7.0.0/24 key=9"
    "gtpu gtpu 2152 10.8.0.0/24 gtpu"
)

# config SIDE [EXTRA]: the side's tep.toml; EXTRA adds the eleventh tunnel.
config() {
    local side=$1 extra=${2:-} t name kind port prefix opt inner addrs="" peer
    peer=$((3 - side))
    for t in "${l3[@]}"; do
        read -r name kind port prefix opt <<<"$t"
        case "$prefix" in
        *:*) inner="${prefix%::/64}::$side/64" ;;
        *) inner="${prefix%.0/24}.$side/24" ;;
        esac
        addrs+="\"$inner\", "
    done
    cat <<EOF
[host]
tun = "tepsoak0"
tap = "tepsoak1"
tun_addresses = [${addrs%, }]
tap_addresses = ["10.10.0.$side/24"]
control = "$work/$side.sock"
EOF
    for t in "${l3[@]}"; do
        read -r name kind port prefix opt <<<"$t"
        printf '\n[[tunnel]]\nname = "%s"\nkind = "%s"\nlocal = "192.0.2.%s"\nremote = "192.0.2.%s"\n' \
            "$name" "$kind" "$side" "$peer"
        printf 'local_port = %s\nremote_port = %s\ninner_prefixes = ["%s"]\n' "$port" "$port" "$prefix"
        case "$opt" in
        gtpu) printf 'teid = %s\nlocal_teid = %s\n' "$((100 * peer))" "$((100 * side))" ;;
        -) ;;
        *) echo "${opt%=*} = ${opt#*=}" ;;
        esac
    done
    printf '\n[[tunnel]]\nname = "vxlan"\nkind = "vxlan"\nlocal = "192.0.2.%s"\nremote = "192.0.2.%s"\nvni = 42\n' "$side" "$peer"
    printf '\n[[tunnel]]\nname = "geneve"\nkind = "geneve"\nlocal = "192.0.2.%s"\nremote = "192.0.2.%s"\nvni = 43\ninner_macs = ["%s"]\n' \
        "$side" "$peer" "$(mac "$peer")"
    if [ -n "$extra" ]; then
        # Same port as "gue", another peer (nobody there): a route to add
        # and remove, and a tunnel whose counters come and go.
        printf '\n[[tunnel]]\nname = "extra"\nkind = "gue"\nlocal = "192.0.2.%s"\nremote = "192.0.2.9"\ninner_prefixes = ["10.99.0.0/24"]\n' "$side"
    fi
}

config 1 >"$work/1.toml"
config 2 >"$work/2.toml"
udp_snmp "$ns_a" "$work/snmp-1-before.json" RcvbufErrors
udp_snmp "$ns_b" "$work/snmp-2-before.json" RcvbufErrors
tep_start 1 "$ns_a"
tep_start 2 "$ns_b"
pid_a=${daemons[0]}
pid_b=${daemons[1]}
in_a ip link set tepsoak1 address "$(mac 1)"
in_b ip link set tepsoak1 address "$(mac 2)"

# The pinged address of each tunnel on side b.
targets=()
for t in "${l3[@]}"; do
    read -r _ _ _ prefix _ <<<"$t"
    case "$prefix" in *:*) targets+=("${prefix%::/64}::2") ;; *) targets+=("${prefix%.0/24}.2") ;; esac
done
targets+=(10.10.0.2)
for dst in "${targets[@]}"; do
    if ! in_a ping -c 2 -i 0.2 -W 2 -w 5 "$dst" >/dev/null 2>&1; then
        echo "soak.sh: no ping through to $dst before the soak; counters:" >&2
        for side in 1 2; do tep_ctl "$side" show counters >&2 || true; done
        in_a ip route >&2
        exit 1
    fi
done
say "both daemons up (pids $pid_a, $pid_b), every tunnel pings; soaking for $minutes min"

seconds=$((minutes * 60))
end=$((SECONDS + seconds))
bg=()

# Pings: every tunnel, 5 a second, a→b, for the whole soak.
for dst in "${targets[@]}"; do
    in_a ping -q -i 0.2 -w "$seconds" "$dst" >"$work/ping-$dst.txt" 2>&1 &
    bg+=($!)
done

# iperf3: rotating over the tunnels, 20 s each.
(
    set +e
    in_b iperf3 -s -p 5201 >/dev/null 2>&1 &
    server=$!
    i=0
    while [ $((SECONDS + 20)) -le "$end" ]; do
        dst=${targets[$((i % ${#targets[@]}))]}
        timeout 40 ip netns exec "$ns_a" iperf3 -c "$dst" -p 5201 -t 20 -P 2 -b 100M -J \
            >"$work/iperf-$i.json" 2>/dev/null
        i=$((i + 1))
    done
    kill "$server" 2>/dev/null
    wait "$server" 2>/dev/null
) &
bg+=($!)

# Garbage both ways.
garbage_ports=""
for t in "${l3[@]}"; do
    read -r _ kind port _ opt <<<"$t"
    garbage_ports+="$kind:$port,"
done
garbage_ports+="vxlan:4789,geneve:6081"
in_a python3 "$here/lib/garbage.py" --from 192.0.2.1 --stranger 192.0.2.3 --to 192.0.2.2 \
    --ports "$garbage_ports" --rate 200 --seconds "$seconds" --out "$work/garbage-to-b.json" &
bg+=($!)
in_b python3 "$here/lib/garbage.py" --from 192.0.2.2 --stranger 192.0.2.4 --to 192.0.2.1 \
    --ports "$garbage_ports" --rate 200 --seconds "$seconds" --out "$work/garbage-to-a.json" --seed 2 &
bg+=($!)

# Reloads every 30 s (alternately with and without the eleventh tunnel)
# and RSS samples every 5 s, until the end.
reloads=0 reload_failures=0 extra=""
: >"$work/rss"
next_reload=$((SECONDS + 30))
while [ "$SECONDS" -lt "$end" ]; do
    sleep 5
    t=$((seconds - (end - SECONDS)))
    for p in "$pid_a" "$pid_b"; do
        if ! kill -0 "$p" 2>/dev/null; then
            say "daemon $p died"
            break 2
        fi
    done
    echo "$t $(awk '/^VmRSS/ { print $2 }' "/proc/$pid_a/status") $(awk '/^VmRSS/ { print $2 }' "/proc/$pid_b/status")" >>"$work/rss"
    if [ "$SECONDS" -ge "$next_reload" ]; then
        next_reload=$((SECONDS + 30))
        if [ -z "$extra" ]; then extra=1; else extra=""; fi
        config 1 $extra >"$work/1.toml"
        config 2 $extra >"$work/2.toml"
        for side in 1 2; do
            reloads=$((reloads + 1))
            if ! out=$(tep_ctl "$side" reload 2>&1); then
                reload_failures=$((reload_failures + 1))
                say "reload of side $side failed: $out"
            fi
        done
        say "$t s: RSS a $(tail -n 1 "$work/rss" | cut -d' ' -f2) KiB, b $(tail -n 1 "$work/rss" | cut -d' ' -f3) KiB; $reloads reloads"
    fi
done
say "traffic stops; waiting for it to drain"
for p in "${bg[@]}"; do
    wait "$p" 2>/dev/null || true
done
# The counters settle: read until two readings 0.5 s apart agree.
prev=""
for _ in $(seq 20); do
    now=""
    for side in 1 2; do
        tep_ctl "$side" show tunnels --json >"$work/tunnels-$side.json" 2>/dev/null || echo '{}' >"$work/tunnels-$side.json"
        tep_ctl "$side" show counters --json >"$work/counters-$side.json" 2>/dev/null || echo '{}' >"$work/counters-$side.json"
        now+=$(cat "$work/tunnels-$side.json" "$work/counters-$side.json" | sed 's/"sleeps":[0-9]*//')
    done
    [ "$now" = "$prev" ] && break
    prev=$now
    sleep 0.5
done
udp_snmp "$ns_a" "$work/snmp-1-after.json" RcvbufErrors
udp_snmp "$ns_b" "$work/snmp-2-after.json" RcvbufErrors
# SIGTERM: each daemon drains and exits; its status is part of the check.
exits=""
for p in "$pid_a" "$pid_b"; do
    kill -TERM "$p" 2>/dev/null || true
    st=0
    wait "$p" 2>/dev/null || st=$?
    exits+="$st "
done
daemons=()

python3 - "$work" "$minutes" "$reloads" "$reload_failures" "$exits" <<'EOF'
import glob, json, sys
work, minutes, reloads, reload_failures, exits = sys.argv[1:]
fail = []
def load(p):
    try:
        return json.load(open(f"{work}/{p}"))
    except Exception:
        return None

def snmp(side, when):
    """NoPorts, InErrors and RcvbufErrors of the namespace, IPv4 + IPv6."""
    return json.load(open(f"{work}/snmp-{side}-{when}.json"))

print()
print(f"soak: {minutes} min, two daemons, ten tunnels each (every kind)")
# No crash.
codes = exits.split()
print(f"daemons: exit status on SIGTERM a {codes[0]}, b {codes[1]}; "
      f"reloads {reloads}, refused or unanswered {reload_failures}")
if codes != ["0", "0"]:
    fail.append(f"a daemon did not exit 0 on SIGTERM: {codes}")
if reload_failures != "0":
    fail.append(f"{reload_failures} reloads failed")

# Memory.
rss = [tuple(map(int, l.split())) for l in open(f"{work}/rss") if len(l.split()) == 3]
after = [r for r in rss if r[0] >= 60] or rss[-1:]
# Growth: the median of the last minute's samples against the median of
# the second minute's. A sender's RSS swings by a MiB or so with the
# traffic (buffers of super-packets in flight) and comes back; a leak
# moves the medians.
import statistics
last_t = rss[-1][0] if rss else 0
for k, side in ((1, "a"), (2, "b")):
    if not after:
        fail.append("no RSS samples")
        break
    second = [r[k] for r in after if r[0] < 120] or [after[0][k]]
    final = [r[k] for r in after if r[0] >= last_t - 60] or [after[-1][k]]
    base, end_ = statistics.median(second), statistics.median(final)
    lo, peak = min(r[k] for r in after), max(r[k] for r in after)
    growth = end_ - base
    print(f"RSS {side}: {rss[0][k]} KiB at {rss[0][0]} s; median {base:.0f} KiB in the second minute, "
          f"{end_:.0f} KiB in the last; range after the first minute {lo}..{peak} KiB: "
          f"growth {growth:+.0f} KiB (limit 1024)")
    if growth > 1024:
        fail.append(f"RSS of {side} grew by {growth:.0f} KiB after the first minute")

# Traffic carried.
pings = []
for f in sorted(glob.glob(f"{work}/ping-*.txt")):
    text = open(f).read()
    sent = recv = 0
    for l in text.splitlines():
        if "packets transmitted" in l:
            sent, recv = int(l.split()[0]), int(l.split()[3])
    pings.append((f.split("ping-")[1][:-4], sent, recv))
print("ping a→b through each tunnel (sent/received): " +
      ", ".join(f"{d} {s}/{r}" for d, s, r in pings))
gbps = []
for f in glob.glob(f"{work}/iperf-*.json"):
    r = load(f.split("/")[-1])
    if r and "error" not in r:
        gbps.append((r["end"]["sum_received"]["bytes"], r["end"]["sum_sent"].get("retransmits", 0)))
print(f"iperf3: {len(gbps)} transfers, {sum(b for b, _ in gbps) / 1e9:.2f} GB, "
      f"{sum(r for _, r in gbps)} retransmits")

# Accounting.
ta, tb, ca, cb = (load(f) for f in ("tunnels-1.json", "tunnels-2.json", "counters-1.json", "counters-2.json"))
if not all((ta, tb, ca, cb)) or "tunnels" not in ta or "tunnels" not in tb:
    fail.append("a daemon did not answer `tep show` at the end")
    print("FAIL: " + "; ".join(fail))
    sys.exit(1)
RX_NODES = ("ip-input", "udp-input", "udp-checksum-verify", "decap-output", "gro",
            "udp-train", "udp-train-split", "train-merge")
def rx_side(d):
    return d["node"] in RX_NODES or d["node"].endswith("-decap")
garbage = {"a": load("garbage-to-a.json"), "b": load("garbage-to-b.json")}
kernel = {}
for side in (1, 2):
    b, e = snmp(side, "before"), snmp(side, "after")
    kernel[side] = {k: e[k] - b[k] for k in b}
for me, peer, t_me, t_peer, c_me, side in (("a", "b", ta, tb, ca, 1), ("b", "a", tb, ta, cb, 2)):
    io, pipe = c_me["io"], c_me["pipeline"]
    rx = sum(t["rx_packets"] for t in t_me["tunnels"])
    rx_drops = sum(d["packets"] for d in c_me["drops"] if rx_side(d))
    by_reason = {}
    for d in c_me["drops"]:
        if rx_side(d):
            by_reason[f'{d["node"]}/{d["reason"]}'] = d["packets"]
    answered = pipe.get("answered", 0)
    # Datagrams into the pipeline (a GRO train counts each of its
    # datagrams; io's udp_rx counts messages, a train as one).
    got_in = pipe["decap_in"]
    # Host-layer drops on the way to the device.
    dev_drops = io.get("drop_device_write", 0) + io.get("drop_no_device", 0)
    left = got_in - rx - rx_drops - answered - dev_drops
    print()
    print(f"daemon {me}: received {got_in} datagrams ({io['udp_rx']} messages) = delivered {rx} "
          f"+ dropped {rx_drops} + answered {answered} + lost writing to the device {dev_drops}"
          + ("" if left == 0 else f"  (off by {left})"))
    print("  receive-side drops by reason: " +
          (", ".join(f"{k} {v}" for k, v in sorted(by_reason.items())) or "none"))
    print("  host-layer drops: " + (", ".join(f"{k} {v}" for k, v in io.items() if k.startswith("drop_") and v) or "none"))
    if left != 0:
        fail.append(f"daemon {me}: {got_in} received != delivered {rx} + drops {rx_drops} + answered {answered} + {dev_drops}")
    g = garbage[me] or {"total": 0, "by_kind": {}}
    # The peer answers a G-PDU with an unknown TEID (garbage) with a GTP-U
    # Error Indication (TS 29.281), which this side drops as signalling.
    c_peer = cb if me == "a" else ca
    indications = c_peer["pipeline"].get("generated", 0)
    print(f"  garbage sent to it: {g['total']}, and {indications} Error Indications its peer generated "
          f"in answer to garbage (" + ", ".join(f"{k} {v}" for k, v in sorted(g["by_kind"].items())) + ")")
    if g["total"] + indications != rx_drops:
        fail.append(f"daemon {me}: {g['total']} garbage + {indications} Error Indications, {rx_drops} receive-side drops")
    # Per direction: what the peer's tunnels sent and this one did not
    # deliver.
    sent = {t["name"]: t["tx_packets"] for t in t_peer["tunnels"]}
    got = {t["name"]: t["rx_packets"] for t in t_me["tunnels"]}
    rows = [(n, sent.get(n, 0), got.get(n, 0)) for n in sorted(set(sent) | set(got))]
    print(f"  {peer}→{me} per tunnel (tx at {peer} / rx at {me}): " +
          ", ".join(f"{n} {s}/{r}" + ("" if s == r else f" ({s - r:+d})") for n, s, r in rows))
    gap = sum(s for _, s, _ in rows) - sum(r for _, _, r in rows)
    k = kernel[side]
    real = rx_drops - g["total"] - indications
    explained = real + dev_drops + k["NoPorts"] + k["InErrors"]
    print(f"  {peer}→{me} tx − rx = {gap}: real traffic dropped by tep {real}, lost writing to the device {dev_drops}, "
          f"kernel UDP NoPorts {k['NoPorts']} (before the daemon listened), InErrors {k['InErrors']} "
          f"(receive buffer full {k['RcvbufErrors']})")
    if gap != explained:
        fail.append(f"{peer}→{me}: tx − rx = {gap}, explained {explained}")
print()
if fail:
    print("FAIL: " + "; ".join(fail))
    sys.exit(1)
print("PASS")
EOF
