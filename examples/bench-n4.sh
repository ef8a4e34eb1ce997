#!/usr/bin/env bash
# bench-n4.sh: how many PFCP sessions per second tep's UPF establishes and
# deletes, end to end over N4 (UDP 8805), with its dataplane installing
# every session in the workers' tables.
#
#   sudo ./examples/bench-n4.sh [SESSIONS] [ROUNDS] [WINDOW]
#
# Two namespaces joined by a veth pair: a runs `tep run` as a UPF ([pfcp],
# host mode, one worker) pinned to CPU 0; b runs the load generator
# (`tep bench n4`: every request built before the clock starts, WINDOW
# outstanding) pinned to CPU 1. Each round establishes SESSIONS PDU
# sessions (uplink PDR with CHOOSE, downlink PDR, two FARs, a QER, a URR)
# and deletes them; the table gives each round and the medians. Defaults:
# 100000 sessions, 5 rounds, 64 outstanding.
#
# Environment: TEP=/path/to/tep skips the build; PROFILES=simple,rich runs
# each round with each session profile (`tep bench n4 --profile`).
set -euo pipefail
script=$(basename "$0")
sessions=${1:-100000}
rounds=${2:-5}
window=${3:-64}
source "$(dirname "$0")/lib/two-hosts.sh"
find_tep
two_hosts "tepn4$$"
cat >"$work/a.toml" <<TOML
[host]
tun = "n6"
control = "$work/a.sock"
cpus = [0]
[pfcp]
listen = "192.0.2.1"
n3 = ["192.0.2.1"]
ue_prefixes = ["10.128.0.0/9"]
max_sessions = $((sessions + 1024))
TOML
tep_start a "$ns_a"
# The N4 thread and the workers share CPU 0 with the rest of the daemon.
taskset -apc 0 "${daemons[0]}" >/dev/null
in_b taskset -c 1 "$TEP" bench n4 --upf 192.0.2.1 --sessions "$sessions" \
    --rounds "$rounds" --window "$window" ${PROFILES:+--profile "$PROFILES"}
echo
echo "tep show pfcp (side a):"
tep_ctl a show pfcp
