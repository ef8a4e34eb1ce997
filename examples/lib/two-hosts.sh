# two-hosts.sh: sourced by the scripts beside it (demo.sh, soak.sh and the
# benches). Two network namespaces joined by one veth pair stand for two
# hosts, with a `tep run` daemon on either side. Nothing is left behind: the
# namespaces, the daemons and the temporary files go on exit, also on Ctrl-C.
#
# The caller sets `script` (its name, for messages) before sourcing, then
# calls preflight, find_tep and two_hosts TAG. Afterwards: $ns_a, $ns_b, $work, in_a,
# in_b, tep_ctl, tep_start, tep_stop_all.

# udp_snmp NS FILE [COUNTER...]: the namespace's kernel UDP counters (IPv4
# and IPv6 added up) as JSON: NoPorts (no socket on the port: nobody
# listened yet), InErrors (receive buffer full, bad checksums, ...) and
# each COUNTER named.
udp_snmp() {
    local ns=$1 file=$2
    shift 2
    ip netns exec "$ns" cat /proc/net/snmp /proc/net/snmp6 | python3 -c '
import json, sys
lines = sys.stdin.read().splitlines()
out = dict.fromkeys(["NoPorts", "InErrors"] + sys.argv[1:], 0)
heads = [l.split() for l in lines if l.startswith("Udp:")]
if len(heads) == 2:
    for k, v in zip(heads[0][1:], heads[1][1:]):
        if k in out:
            out[k] += int(v)
for l in lines:
    f = l.split()
    if len(f) == 2 and f[0].startswith("Udp6") and f[0][4:] in out:
        out[f[0][4:]] += int(f[1])
print(json.dumps(out))' "$@" >"$file"
}

# usage [STATUS]: the comment block at the top of the caller, then exit.
usage() {
    awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"
    exit "${1:-2}"
}

# one_of WHAT VALUE LIST: exit 2 unless VALUE is in the comma-separated LIST.
one_of() {
    case ",$3," in *",$2,"*) ;; *) echo "$script: unknown $1 $2 (one of $3)" >&2; exit 2 ;; esac
}

# preflight COMMAND:PACKAGE...: root (network namespaces need it) and every
# COMMAND, else exit 2 naming the packages to install.
preflight() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "$script: network namespaces need root: run $0 as root" >&2
        exit 2
    fi
    local tool missing=()
    for tool in "$@"; do
        command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "$script: missing tools; install them with:" >&2
        echo "  apt-get install ${missing[*]}" >&2
        exit 2
    fi
}

# find_tep [tep-bench]: $TEP if set, else builds tep (release) and points
# TEP at it. With tep-bench, TEP_BENCH too: $TEP_BENCH if set, else the
# tep-bench beside $TEP (built with tep when TEP is not set).
find_tep() {
    local repo cargo home packages=(-p tep)
    [ "${1:-}" = tep-bench ] && packages+=(-p tep-bench)
    repo=$(cd "$(dirname "$0")/.." && pwd)
    if [ -z "${TEP:-}" ]; then
        # Under sudo, root's PATH usually lacks the user's ~/.cargo/bin: build
        # as that user with their cargo, so target/ does not become root's.
        cargo=$(command -v cargo || true)
        local as_user=()
        if [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
            home=$(getent passwd "$SUDO_USER" | cut -d: -f6)
            [ -z "$cargo" ] && [ -x "$home/.cargo/bin/cargo" ] && cargo=$home/.cargo/bin/cargo
            as_user=(sudo -u "$SUDO_USER" env "PATH=$home/.cargo/bin:$PATH")
        fi
        if [ -z "$cargo" ]; then
            echo "$script: cargo not found; build tep first and run: sudo TEP=/path/to/tep $0" >&2
            exit 2
        fi
        echo "building ${packages[*]} (cargo build --release ${packages[*]})..." >&2
        (cd "$repo" && "${as_user[@]}" "$cargo" build --release "${packages[@]}" --quiet)
        TEP=${CARGO_TARGET_DIR:-$repo/target}/release/tep
    fi
    [ -x "$TEP" ] || { echo "$script: $TEP is not an executable" >&2; exit 2; }
    if [ "${1:-}" = tep-bench ]; then
        TEP_BENCH=${TEP_BENCH:-$(dirname "$TEP")/tep-bench}
        [ -x "$TEP_BENCH" ] || {
            echo "$script: no tep-bench at $TEP_BENCH (cargo build -p tep-bench, or set TEP_BENCH)" >&2
            exit 2
        }
    fi
}

# two_hosts TAG: namespaces ${TAG}a and ${TAG}b (unique names: several runs,
# or the tests, may go side by side), a veth pair va–vb with 192.0.2.1/24,
# 2001:db8::1/64 on a and .2 on b, and the cleanup on exit.
two_hosts() {
    local tag=$1 ns
    ns_a="${tag}a"
    ns_b="${tag}b"
    work=$(mktemp -d "/tmp/${tag}.XXXXXX")
    daemons=()
    trap two_hosts_cleanup EXIT
    # Ctrl-C and kill end the script through the EXIT trap.
    trap 'echo " interrupted" >&2; exit 130' INT
    trap 'exit 143' TERM
    for ns in "$ns_a" "$ns_b"; do
        ip netns add "$ns"
        ip netns exec "$ns" ip link set lo up
        # No duplicate address detection: IPv6 addresses work at once.
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
    done
    # The veth ends are created inside the namespaces directly.
    ip link add va netns "$ns_a" type veth peer name vb netns "$ns_b"
    in_a ip addr add 192.0.2.1/24 dev va
    in_a ip addr add 2001:db8::1/64 dev va nodad
    in_b ip addr add 192.0.2.2/24 dev vb
    in_b ip addr add 2001:db8::2/64 dev vb nodad
    in_a ip link set va up
    in_b ip link set vb up
}

two_hosts_cleanup() {
    set +e
    local pid ns
    for pid in "${daemons[@]}"; do
        kill -TERM "$pid" 2>/dev/null
    done
    for ns in "$ns_a" "$ns_b"; do
        # Whatever still runs inside (a server, a daemon that did not stop)
        # would keep the namespace alive.
        for pid in $(ip netns pids "$ns" 2>/dev/null); do
            kill -KILL "$pid" 2>/dev/null
        done
        ip netns del "$ns" 2>/dev/null
    done
    rm -rf "$work"
}

in_a() { ip netns exec "$ns_a" "$@"; }
in_b() { ip netns exec "$ns_b" "$@"; }

# tep_ctl SIDE ARGS...: `tep ARGS --socket` of that side's daemon.
tep_ctl() {
    local side=$1
    shift
    timeout 10 "$TEP" "$@" --socket "$work/$side.sock"
}

# tep_start SIDE NS: starts the daemon of SIDE with $work/SIDE.toml (whose
# host.control is $work/SIDE.sock); waits until its control socket answers.
tep_start() {
    local side=$1 ns=$2 pid
    ip netns exec "$ns" "$TEP" run -c "$work/$side.toml" >/dev/null 2>"$work/$side.log" &
    pid=$!
    daemons+=("$pid")
    for _ in $(seq 100); do
        tep_ctl "$side" show tunnels >/dev/null 2>&1 && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "tep did not come up on side $side:" >&2
    cat "$work/$side.log" >&2
    return 1
}

# tep_stop_all: SIGTERM to every daemon, wait (5 s at most each), forget them.
tep_stop_all() {
    local pid
    for pid in "${daemons[@]}"; do
        kill -TERM "$pid" 2>/dev/null || continue
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    daemons=()
}
