#!/usr/bin/env bash
# demo.sh: tep's host mode, every tunnel kind, in one minute.
#
#   sudo ./examples/demo.sh [--quick] [--kinds K,...] [--modes M,...] [--families F,...]
#
# Two network namespaces joined by a veth pair stand for two hosts. For each
# tunnel kind in turn, a `tep run` daemon in each namespace brings up one
# tunnel between them; ping and a short iperf3 TCP transfer cross it, and
# tep's own counters (`tep show tunnels|counters --json`) say what it
# carried and dropped. One table at the end. Nothing is left behind: the
# namespaces, the daemons and the temporary files go on exit, also on
# Ctrl-C. The root namespace's interfaces are never touched.
#
# Kinds: gue (variant 0), gue-v1 (gue_variant = 1: no GUE header),
# fou-ipip, fou-sit (carries IPv6), fou-gre, gue-gre (GRE in GUE, Linux's
# GRE with `encap gue`), gre (GRE-in-UDP), vxlan, geneve, gtpu. Modes: zero, full, lco, offload, remote (vxlan and gue
# only). Families (the outer IP): ipv4, ipv6.
#
# Environment: TEP=/path/to/tep skips the build and runs that binary.
# Exit status: 0 when every tunnel passed traffic, 1 when one did not,
# 2 for bad usage or a missing tool.
set -euo pipefail
script=demo.sh
# shellcheck source=lib/two-hosts.sh
. "$(dirname "$0")/lib/two-hosts.sh"

all_kinds="gue,gue-v1,fou-ipip,fou-sit,fou-gre,gue-gre,gre,vxlan,geneve,gtpu"
kinds=$all_kinds
modes=full
families=ipv4
seconds=2
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) seconds=1 ;;
    --kinds) kinds=${2:?--kinds needs a list}; shift ;;
    --kinds=*) kinds=${1#*=} ;;
    --modes) modes=${2:?--modes needs a list}; shift ;;
    --modes=*) modes=${1#*=} ;;
    --families) families=${2:?--families needs a list}; shift ;;
    --families=*) families=${1#*=} ;;
    -h | --help) usage 0 ;;
    *) echo "demo.sh: unknown option $1" >&2; usage 2 ;;
    esac
    shift
done
IFS=, read -r -a kind_list <<<"$kinds"
IFS=, read -r -a mode_list <<<"$modes"
IFS=, read -r -a family_list <<<"$families"
for k in "${kind_list[@]}"; do one_of kind "$k" "$all_kinds"; done
for m in "${mode_list[@]}"; do one_of mode "$m" zero,full,lco,offload,remote; done
for f in "${family_list[@]}"; do one_of family "$f" ipv4,ipv6; done
preflight ip:iproute2 ping:iputils-ping iperf3:iperf3 python3:python3 timeout:coreutils
find_tep
two_hosts "tepdemo$$"

# config KIND MODE FAMILY SIDE: the tep.toml of one side (1 = a, 2 = b).
config() {
    local kind=$1 mode=$2 family=$3 side=$4
    local local_ip remote_ip tep_kind=$kind extra=""
    if [ "$family" = ipv4 ]; then
        local_ip=192.0.2.$side remote_ip=192.0.2.$((3 - side))
    else
        local_ip=2001:db8::$side remote_ip=2001:db8::$((3 - side))
    fi
    # FOU-SIT carries IPv6 only; every other L3 kind gets IPv4 inside.
    local inner="10.9.0.$side/24" prefix="10.9.0.0/24"
    if [ "$kind" = fou-sit ]; then
        inner="fd09::$side/64" prefix="fd09::/64"
    fi
    case "$kind" in
    gue-v1) tep_kind=gue extra="gue_variant = 1" ;;
    vxlan | geneve) extra="vni = 42" ;;
    # Each side sends the TEID the other accepts.
    gtpu) if [ "$side" = 1 ]; then extra=$'teid = 200\nlocal_teid = 100\nqfi = 9'; else extra=$'teid = 100\nlocal_teid = 200\nqfi = 9'; fi ;;
    gre | fou-gre | gue-gre) extra="key = 7" ;;
    esac
    echo "[host]"
    case "$kind" in
    vxlan | geneve) printf 'tap = "tepdemo1"\ntap_addresses = ["%s"]\n' "$inner" ;;
    *) printf 'tun = "tepdemo0"\ntun_addresses = ["%s"]\n' "$inner" ;;
    esac
    printf 'control = "%s/%s.sock"\n\n' "$work" "$side"
    printf '[[tunnel]]\nname = "demo"\nkind = "%s"\nlocal = "%s"\nremote = "%s"\nchecksum = "%s"\n' \
        "$tep_kind" "$local_ip" "$remote_ip" "$mode"
    echo "$extra"
    case "$kind" in vxlan | geneve) ;; *) printf 'inner_prefixes = ["%s"]\n' "$prefix" ;; esac
    # RFC 6935/6936: zero over IPv6 is opt-in on both ends.
    if [ "$mode" = zero ] && [ "$family" = ipv6 ]; then
        printf 'zero_checksum_tx = true\nzero_checksum_rx = true\n'
    fi
    # Remote checksum offload is opt-in on the receiver.
    if [ "$mode" = remote ]; then echo "remote_checksum_rx = true"; fi
}

# iperf3_gbps DST: a TCP transfer from a to the server in b, bounded in
# time; prints Gbit/s received, or "ERR: why".
iperf3_gbps() {
    local dst=$1 server
    in_b iperf3 -s -1 -B "$dst" -p 5201 >/dev/null 2>&1 &
    server=$!
    # Ready when it listens (ss is part of iproute2).
    for _ in $(seq 50); do
        in_b ss -Hltn "sport = :5201" | grep -q . && break
        sleep 0.05
    done
    # --foreground: Ctrl-C reaches iperf3 too (timeout otherwise runs it in
    # a process group of its own).
    timeout --foreground -k 2 $((seconds + 8)) \
        ip netns exec "$ns_a" iperf3 -c "$dst" -p 5201 -t "$seconds" -J >"$work/iperf.json" 2>/dev/null || true
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    python3 - "$work/iperf.json" <<'EOF'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("ERR: iperf3 gave no JSON")
    sys.exit()
if "error" in r:
    print("ERR: " + r["error"])
else:
    print("%.2f" % (r["end"]["sum_received"]["bits_per_second"] / 1e9))
EOF
}

# read_counters: both daemons' tunnels and counters into $work, once the
# traffic has drained: read again every 0.2 s (2 s at most) until two
# readings agree, so that nothing is in flight between a sender's tx and
# the receiver's rx.
read_counters() {
    local prev="" now side
    for _ in $(seq 10); do
        for side in 1 2; do
            # A daemon that died leaves no answer: the row says so.
            tep_ctl "$side" show tunnels --json >"$work/tunnels-$side.json" 2>/dev/null || echo '{}' >"$work/tunnels-$side.json"
            tep_ctl "$side" show counters --json >"$work/counters-$side.json" 2>/dev/null || echo '{}' >"$work/counters-$side.json"
        done
        now=$(cat "$work"/tunnels-?.json | sed 's/"rx_bytes[^,]*//g')
        [ "$now" = "$prev" ] && break
        prev=$now
        sleep 0.2
    done
}

# summary: reads the JSON files of a case and prints one table row's
# counter fields, where any difference between tx and rx went, and the
# offload line, tab-separated.
summary() {
    python3 - "$work" <<'EOF'
import json, sys
w = sys.argv[1]
def load(n):
    return json.load(open(f"{w}/{n}.json"))
try:
    ta, tb, ca, cb = load("tunnels-1"), load("tunnels-2"), load("counters-1"), load("counters-2")
    ra, rb = ta["tunnels"][0], tb["tunnels"][0]
    # The kernel's UDP counters of each namespace over the case.
    kernel = {}
    for side in (1, 2):
        b, e = load(f"snmp-{side}-before"), load(f"snmp-{side}-after")
        kernel[side] = {k: e[k] - b[k] for k in b}
except Exception:
    print("\t".join(["-"] * 6 + ["a daemon did not answer `tep show`", "-", "-"]))
    sys.exit()
drops = other = 0
names = []
for c in (ca, cb):
    # drops_total = pipeline drops (every node, every reason) + host drops.
    drops += c["drops_total"]
    for d in c["drops"]:
        # IPv6 router solicitations and MLD reports the devices send to
        # multicast groups no tunnel routes: expected, listed apart.
        if d["reason"] == "no_route":
            other += d["packets"]
        else:
            names.append(f'{d["node"]}/{d["reason"]}')
    names += [k for k, v in c["io"].items() if k.startswith("drop_") and v]
# Where the datagrams one side sent and the other did not deliver went:
# the receiving namespace's kernel (no socket yet on the port: the
# sender's device talks — IPv6 DAD, MLD, router solicitations — before the
# receiver's daemon is up; a full receive buffer; a bad checksum), or the
# receiver's pipeline (drops on the way in, by node and reason). What is
# left unexplained is said so.
RX_NODES = ("ip-input", "udp-input", "udp-checksum-verify", "decap-output", "gro",
            "udp-train", "udp-train-split", "train-merge")
def rx_drops(c):
    return sum(d["packets"] for d in c["drops"]
               if d["node"] in RX_NODES or d["node"].endswith("-decap"))
def where(tx, rx, side, c, arrow):
    gap = tx - rx
    if gap == 0:
        return []
    parts, left = [], gap
    peer = "ab"[side - 1]
    for n, what in ((kernel[side]["NoPorts"], "before its daemon listened"),
                    (kernel[side]["InErrors"], "kernel UDP errors"),
                    (rx_drops(c), "dropped by tep")):
        n = min(n, left) if left > 0 else 0
        if n:
            parts.append(f"{n} {what} ({peer})")
            left -= n
    if left > 0:
        parts.append(f"{left} UNEXPLAINED")
    elif left < 0:
        parts.append(f"rx {-left} over tx²")
    return [f"{arrow} {gap:+d}: " + ", ".join(parts)]
gone = where(ra["tx_packets"], rb["rx_packets"], 2, cb, "a→b") + \
       where(rb["tx_packets"], ra["rx_packets"], 1, ca, "b→a")
io = ta["io"]
dev = "; ".join(f'{d["name"]} ({d["kind"]}, mtu {d["mtu"]}): {d["offloads"]}' for d in io["devices"])
on = lambda b: "on" if b else "off"
sock = "; ".join(
    f'udp {s["local"]}: gso {on(s["gso"])}, gro {on(s["gro"])}, zero csum tx {on(s["zero_checksum_tx"])}/rx {on(s["zero_checksum_rx"])}'
    for s in io["sockets"])
offl = f'{dev} | {sock} | checksum: {ra["checksum_in_effect"]}'
print("\t".join(map(str, [ra["tx_packets"], rb["rx_packets"], rb["tx_packets"], ra["rx_packets"],
                          drops - other, other, ",".join(sorted(set(names))) or "-",
                          "; ".join(gone) or "balanced", offl])))
EOF
}

rows=()
offloads=()
rx_more=0
unexplained=0
failed=0
started=$SECONDS
for kind in "${kind_list[@]}"; do
    for family in "${family_list[@]}"; do
        for mode in "${mode_list[@]}"; do
            # RCO exists for VXLAN and GUE's header only (variant 1 has none).
            if [ "$mode" = remote ] && [ "$kind" != vxlan ] && [ "$kind" != gue ]; then
                continue
            fi
            label="$kind $family $mode"
            printf '%-24s' "$label" >&2
            config "$kind" "$mode" "$family" 1 >"$work/1.toml"
            config "$kind" "$mode" "$family" 2 >"$work/2.toml"
            udp_snmp "$ns_a" "$work/snmp-1-before.json"
            udp_snmp "$ns_b" "$work/snmp-2-before.json"
            if ! tep_start 1 "$ns_a" || ! tep_start 2 "$ns_b"; then
                tep_stop_all
                rows+=("$kind|$family|$mode|FAIL|-|-|-|-|-|-|0|-|tep did not start (log above)")
                failed=1
                continue
            fi
            if [ "$kind" = fou-sit ]; then dst=fd09::2; else dst=10.9.0.2; fi
            # One ping first: L2 tunnels resolve the peer (ARP/ND) through
            # the tunnel; the measured pings then see the path alone.
            in_a ping -c 1 -W 2 "$dst" >/dev/null 2>&1 || true
            ping_out=$(in_a timeout 10 ping -c 5 -i 0.2 -W 1 "$dst" 2>&1 || true)
            received=$(sed -n 's/.* \([0-9]*\) received.*/\1/p' <<<"$ping_out")
            received=${received:-0}
            rtt=$(sed -n 's|^rtt [^=]*= [0-9.]*/\([0-9.]*\)/\([0-9.]*\)/.*|\1 \2|p' <<<"$ping_out")
            read -r ping_avg ping_max <<<"${rtt:-- -}"
            gbps=$(iperf3_gbps "$dst")
            note=""
            read_counters
            udp_snmp "$ns_a" "$work/snmp-1-after.json"
            udp_snmp "$ns_b" "$work/snmp-2-after.json"
            IFS=$'\t' read -r a_tx b_rx b_tx a_rx drops expected why gone offl <<<"$(summary)"
            tep_stop_all
            status=ok
            if [ "$received" -eq 0 ] || [[ $gbps == ERR* ]] || [ "$a_tx" = - ]; then
                status=FAIL
                failed=1
            fi
            [ "$received" -lt 5 ] && note="ping $received/5"
            [[ $gbps == ERR* ]] && note="${note:+$note; }iperf3: ${gbps#ERR: }" && gbps=-
            [ "$a_tx" = - ] && note="${note:+$note; }no counters: $why"
            [ "$a_tx" != - ] && [ "$drops" != 0 ] && note="${note:+$note; }dropped: $why"
            # Receivers count more than senders sent: see the footnote.
            [[ $gone == *"over tx²"* ]] && rx_more=1
            [[ $gone == *UNEXPLAINED* ]] && unexplained=1
            echo "$status  ${gbps} Gbit/s, ping ${ping_avg} ms" >&2
            rows+=("$kind|$family|$mode|$status|$gbps|$ping_avg|$ping_max|$a_tx/$b_rx|$b_tx/$a_rx|$drops|$expected|$gone|$note")
            offloads+=("$(printf '%-24s %s' "$label" "$offl")")
        done
    done
done

echo
# printf pads by bytes: the arrows (3 bytes each) get 2 more of width.
printf '%-9s %-6s %-8s %-5s %8s %15s %19s %19s %6s  %-36s %s\n' \
    kind outer checksum pass Gbit/s "ping avg/max ms" "pkts a→b tx/rx " "pkts b→a tx/rx " drops \
    "tx − rx: where it went" "notes"
for r in "${rows[@]}"; do
    IFS='|' read -r k f m s g pa pm ab ba d e gone n <<<"$r"
    [ "$e" != 0 ] && [ "$e" != - ] && n="${n:+$n; }+$e no_route¹"
    printf '%-9s %-6s %-8s %-5s %8s %15s %17s %17s  %6s  %-36s %s\n' \
        "$k" "$f" "$m" "$s" "$g" "$pa/$pm" "$ab" "$ba" "$d" "$gone" "$n"
done
echo
echo "offloads in effect (side a; from \`tep show tunnels --json\` .io):"
for o in "${offloads[@]}"; do
    echo "  $o"
done
echo
echo "iperf3 TCP ${seconds} s, one stream, a→b; ping -c 5 -i 0.2 a→b. Packets: tep's tunnel counters"
echo "(tx of the sender, rx of the receiver). Drops: pipeline and host drops of both daemons."
echo "¹ no_route: IPv6 router solicitations and MLD reports the TUN device sends to multicast"
echo "  groups no tunnel routes; expected, not counted in drops."
echo "tx − rx: counters read once the traffic has drained. \"before its daemon listened\": the"
echo "  receiving namespace's kernel UDP NoPorts, datagrams the sender's device sent (IPv6 DAD,"
echo "  MLD reports, router solicitations: an L2 tunnel carries them all) while the peer's"
echo "  daemon was not up yet; \"kernel UDP errors\": its InErrors (receive buffer full, bad"
echo "  checksum; over IPv6 a zero checksum while no socket has opted in to it);"
echo "  \"dropped by tep\": the receiver's pipeline drops on the way in."
if [ "$unexplained" = 1 ]; then
    echo "UNEXPLAINED: a difference none of the counters above accounts for."
fi
if [ "$rx_more" = 1 ]; then
    echo "² rx above tx: tep counts a GRO super-packet written to the device as one datagram more"
    echo "  than it carried (the inner TCP header is counted as payload)."
fi
echo "$((SECONDS - started)) s in all."
exit "$failed"
