#!/usr/bin/env python3
"""garbage.py: datagrams that no tunnel should deliver, at tunnel ports.

Used by soak.sh. Sends, at RATE datagrams a second for SECONDS, to each
port of --ports (KIND:PORT,...) on --to in turn, one of:
  - truncated: fewer bytes than the kind's header (0 included);
  - corrupt: a whole header that is wrong: an unknown VNI/TEID/key, a bad
    version or flag, an inner packet that is no IP version the kind
    carries;
  - stranger: random bytes from --stranger, an address that is no
    tunnel's peer.
Truncated and corrupt ones come from --from (the real peer's address), so
they reach the kind's parser. Writes what it sent to --out as JSON:
{"total": N, "by_kind": {"vxlan/truncated": n, ...}}. Random but
reproducible (--seed).
"""

import argparse
import json
import random
import socket
import struct
import time

# The shortest header each kind needs before it can deliver anything.
HEADER = {
    "vxlan": 8, "geneve": 8, "gtpu": 8, "gre": 4, "fou-gre": 4,
    "gue": 4, "gue-gre": 8, "fou-ipip": 1, "fou-sit": 1, "gue1": 1,
}


def rand(r, n):
    return bytes(r.getrandbits(8) for _ in range(n))


def not_ip(r, version_ok):
    """A first byte whose version nibble is none of version_ok, then bytes."""
    first = r.choice([v for v in range(16) if v not in version_ok]) << 4 | r.getrandbits(4)
    return bytes([first]) + rand(r, r.randrange(19, 80))


def gre(r, key_ok):
    """A GRE header that is wrong: a version other than 0, or a key that
    is no tunnel's."""
    if r.random() < 0.5:
        return struct.pack("!HH", 0x2000 | r.randrange(1, 8), 0x0800) + struct.pack("!I", r.getrandbits(32)) + rand(r, 20)
    key = r.choice([k for k in range(1, 50) if k not in key_ok])
    return struct.pack("!HHI", 0x2000, 0x0800, key) + rand(r, 20)


def corrupt(r, kind):
    if kind == "vxlan":
        if r.random() < 0.5:
            # The I flag off: no VNI.
            return struct.pack("!II", 0, 42 << 8) + rand(r, 60)
        vni = r.choice([v for v in range(1, 1000) if v not in (42, 43)])
        return struct.pack("!II", 0x08000000, vni << 8) + rand(r, 60)
    if kind == "geneve":
        if r.random() < 0.5:
            # Version 1 (only 0 exists).
            return struct.pack("!BBHI", 0x40, 0, 0x6558, 43 << 8) + rand(r, 60)
        vni = r.choice([v for v in range(1, 1000) if v not in (42, 43)])
        return struct.pack("!BBHI", 0, 0, 0x6558, vni << 8) + rand(r, 60)
    if kind == "gtpu":
        payload = rand(r, 40)
        if r.random() < 0.5:
            # GTP version 2 in a G-PDU.
            return struct.pack("!BBHI", 0x50, 0xFF, len(payload), 100) + payload
        teid = r.choice([t for t in range(300, 100000, 7)])
        return struct.pack("!BBHI", 0x30, 0xFF, len(payload), teid) + payload
    if kind in ("gre", "fou-gre"):
        return gre(r, (7, 8, 9))
    if kind == "gue":
        # Variant 2 or 3: no such GUE.
        return bytes([r.choice([0x80, 0xC0]) | r.getrandbits(5), 4, 0, 0]) + rand(r, 40)
    if kind == "gue-gre":
        if r.random() < 0.5:
            return bytes([0x80, 47, 0, 0]) + rand(r, 40)
        return bytes([0, 47, 0, 0]) + gre(r, (7, 8, 9))
    if kind == "gue1":
        # Variant 1 carries IPv4 or IPv6 only: first bits 01.
        return not_ip(r, (4, 5, 6, 7))
    if kind == "fou-ipip":
        return not_ip(r, (4,))
    if kind == "fou-sit":
        return not_ip(r, (6,))
    raise ValueError(kind)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--from", dest="src", required=True)
    p.add_argument("--stranger", required=True)
    p.add_argument("--to", required=True)
    p.add_argument("--ports", required=True, help="KIND:PORT,...")
    p.add_argument("--rate", type=float, default=200)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    r = random.Random(a.seed)
    targets = []
    for item in a.ports.split(","):
        kind, port = item.split(":")
        targets.append((kind, int(port)))
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer.bind((a.src, 0))
    stranger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stranger.bind((a.stranger, 0))
    counts = {}
    total = 0
    start = time.monotonic()
    end = start + a.seconds
    i = 0
    while True:
        now = time.monotonic()
        if now >= end:
            break
        due = start + i / a.rate
        if due > now:
            time.sleep(due - now)
        kind, port = targets[i % len(targets)]
        # The tunnel "gue1" is GUE variant 1 on its own port.
        what = r.choice(("truncated", "corrupt", "stranger"))
        key = "gue1" if (kind == "gue" and port == 6083) else kind
        if what == "truncated":
            data, sock = rand(r, r.randrange(0, HEADER[key])), peer
        elif what == "corrupt":
            data, sock = corrupt(r, key), peer
        else:
            data, sock = rand(r, r.randrange(0, 200)), stranger
        try:
            sock.sendto(data, (a.to, port))
        except OSError:
            # ECONNREFUSED from an earlier ICMP error: not sent, not counted.
            i += 1
            continue
        name = f"{key}/{what}"
        counts[name] = counts.get(name, 0) + 1
        total += 1
        i += 1
    with open(a.out, "w") as f:
        json.dump({"total": total, "by_kind": counts}, f)


if __name__ == "__main__":
    main()
