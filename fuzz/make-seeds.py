#!/usr/bin/env python3
"""Regenerates fuzz/seeds/<target>/ from tep-wire's test vectors.

Plain python3 (no scapy). Reads crates/tep-wire/tests/vectors/*.hex (one
packet per file, starting at the header named by the file's prefix) and
*.pcap (Ethernet link type), dissects every packet down through its tunnels,
and writes each header it meets, from that header to the end of the packet,
as a seed of the target that parses it. The vectors carry no GUE, so GUE
seeds are built here from the GUE layouts in /work/shared/notes/wire-formats.md
around inner IP packets of the vectors.

Generated seeds are replaced on each run; files named crash-* (fuzzer
findings kept as regression inputs) are left alone.

    python3 fuzz/make-seeds.py
"""

import glob
import hashlib
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "..", "crates", "tep-wire", "tests", "vectors")
SEEDS = os.path.join(HERE, "seeds")
TARGETS = ["ethernet", "ipv4", "ipv6", "udp", "tcp", "icmpv4", "icmpv6",
           "gue", "gre", "vxlan", "geneve", "gtpu"]

# Seeds kept per (pcap file, target): one per distinct length.
PCAP_SHAPES = 8

# UDP destination ports of the tunnels in the vectors.
PORT_VXLAN, PORT_GENEVE, PORT_GTPU, PORT_GRE_UDP = 4789, 6081, 2152, 4754


def u16(b, at):
    return struct.unpack_from("!H", b, at)[0]


class Dissector:
    """Walks one packet; `found` collects (target, bytes) pairs."""

    def __init__(self):
        self.found = []
        self.ip_packets = []  # complete inner/outer IP packets, for GUE

    def emit(self, target, data):
        self.found.append((target, bytes(data)))

    def ethernet(self, d):
        if len(d) < 14:
            return
        self.emit("ethernet", d)
        at = 12
        for _ in range(2):
            if u16(d, at) not in (0x8100, 0x88a8) or len(d) < at + 6:
                break
            at += 4
        self.ethertype(u16(d, at), d[at + 2:])

    def ethertype(self, et, d):
        if et == 0x0800:
            self.ipv4(d)
        elif et == 0x86DD:
            self.ipv6(d)
        elif et == 0x6558:
            self.ethernet(d)

    def ip(self, d):
        if d and d[0] >> 4 == 4:
            self.ipv4(d)
        elif d and d[0] >> 4 == 6:
            self.ipv6(d)

    def ipv4(self, d):
        if len(d) < 20:
            return
        self.emit("ipv4", d)
        ihl, total = (d[0] & 0xF) * 4, u16(d, 2)
        self.ip_packets.append(bytes(d[:total]))
        self.l4(d[9], d[ihl:total], first_frag=(u16(d, 6) & 0x1FFF) == 0)

    def ipv6(self, d):
        if len(d) < 40:
            return
        self.emit("ipv6", d)
        payload = d[40:40 + u16(d, 4)]
        self.ip_packets.append(bytes(d[:40 + u16(d, 4)]))
        nxt, at = d[6], 0
        while nxt in (0, 43, 44, 51, 60) and at + 8 <= len(payload):
            h = payload[at:]
            if nxt == 44:
                if u16(h, 2) & 0xFFF8:  # not the first fragment
                    return
                length = 8
            elif nxt == 51:
                length = (h[1] + 2) * 4
            else:
                length = (h[1] + 1) * 8
            nxt, at = h[0], at + length
        self.l4(nxt, payload[at:], first_frag=True)

    def l4(self, proto, d, first_frag):
        if not first_frag:
            return
        if proto == 17:
            self.udp(d)
        elif proto == 6:
            self.emit("tcp", d)
        elif proto == 1:
            self.emit("icmpv4", d)
        elif proto == 58:
            self.emit("icmpv6", d)
        elif proto == 47:
            self.gre(d)
        elif proto in (4, 41):
            self.ip(d)

    def udp(self, d):
        if len(d) < 8:
            return
        self.emit("udp", d)
        payload = d[8:u16(d, 4)]
        port = u16(d, 2)
        if port == PORT_VXLAN:
            self.vxlan(payload)
        elif port == PORT_GENEVE:
            self.geneve(payload)
        elif port == PORT_GTPU or u16(d, 0) == PORT_GTPU:
            self.gtpu(payload)
        elif port == PORT_GRE_UDP:
            self.gre(payload)

    def gre(self, d):
        if len(d) < 4:
            return
        self.emit("gre", d)
        f = u16(d, 0)
        hl = 4 + 4 * sum(1 for bit in (0x8000, 0x2000, 0x1000) if f & bit)
        self.ethertype(u16(d, 2), d[hl:])

    def vxlan(self, d):
        if len(d) < 8:
            return
        self.emit("vxlan", d)
        self.ethernet(d[8:])

    def geneve(self, d):
        if len(d) < 8:
            return
        self.emit("geneve", d)
        self.ethertype(u16(d, 2), d[8 + (d[0] & 0x3F) * 4:])

    def gtpu(self, d):
        if len(d) < 8:
            return
        self.emit("gtpu", d)
        end = 8 + u16(d, 2)
        at = 8
        if d[0] & 0x07 and len(d) >= 12:
            at, nxt = 12, d[11] if d[0] & 0x04 else 0
            while nxt and at < end and d[at]:
                at += d[at] * 4
                nxt = d[at - 1]
        if d[1] == 255:
            self.ip(d[at:end])


def read_pcap(path):
    with open(path, "rb") as f:
        b = f.read()
    magic = b[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        e = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        e = ">"
    else:
        sys.exit("%s: not a classic pcap file" % path)
    if struct.unpack_from(e + "I", b, 20)[0] != 1:
        sys.exit("%s: link type is not Ethernet" % path)
    at, frames = 24, []
    while at + 16 <= len(b):
        incl = struct.unpack_from(e + "I", b, at + 8)[0]
        frames.append(b[at + 16:at + 16 + incl])
        at += 16 + incl
    return frames


def hex_start(name):
    """The layer a .hex vector starts at, from its file name."""
    if name.startswith("base_eth_"):
        return "ethernet"
    if name.startswith("base_"):
        return "ip"
    if name.startswith("gtpu_"):
        return "gtpu"
    for proto in ("geneve", "gre", "vxlan"):
        if name.startswith("tunnel_" + proto):
            return proto
    sys.exit("%s: unknown starting layer" % name)


def gue_seeds(ip_packets):
    """GUE headers (wire-formats.md) around a few inner IP packets."""
    v4 = [p for p in ip_packets if p[0] >> 4 == 4][:2]
    v6 = [p for p in ip_packets if p[0] >> 4 == 6][:2]
    out = []
    for p in v4 + v6:
        proto = 4 if p[0] >> 4 == 4 else 41
        ihl = (p[0] & 0xF) * 4 if proto == 4 else 40
        udp_rco = struct.pack("!HH", ihl, ihl + 6)
        out += [
            ("direct", p),  # variant 1: the IP packet itself
            ("data", bytes([0x00, proto, 0, 0]) + p),
            ("linux-priv", bytes([0x01, proto, 0x00, 0x01, 0, 0, 0, 0]) + p),
            ("linux-rco", bytes([0x02, proto, 0x00, 0x01, 0x80, 0, 0, 0])
             + udp_rco + p),
            ("ietf-g", bytes([0x01, proto, 0x80, 0x00]) + b"\x00\x00\x00\x2a" + p),
            ("ietf-gr", bytes([0x02, proto, 0x82, 0x00]) + b"\x00\x00\x00\x2a"
             + udp_rco + p),
            ("ietf-r", bytes([0x01, proto, 0x02, 0x00]) + udp_rco + p),
            # GUE-GRE as Linux builds it (GRE with `encap gue`): GUE
            # protocol 47, a GRE header with a key, the IP packet.
            ("gre", bytes([0x00, 47, 0, 0, 0x20, 0x00])
             + (b"\x08\x00" if proto == 4 else b"\x86\xdd") + b"\x00\x00\x00\x07" + p),
        ]
    out.append(("control", bytes([0x20, 0x01, 0x00, 0x00]) + b"tep control"))
    return out


def main():
    seeds = {t: [] for t in TARGETS}
    ip_packets = []

    lengths = {}  # (pcap, target) -> lengths already taken

    def take(source, dissector, pcap=None):
        counts = {}
        for target, data in dissector.found:
            if pcap is not None:
                # The kernel captures repeat the same few shapes (a TCP
                # flow): keep one seed per (file, target, length), at most
                # PCAP_SHAPES of them.
                seen = lengths.setdefault((pcap, target), set())
                if len(data) in seen or len(seen) >= PCAP_SHAPES:
                    continue
                seen.add(len(data))
            counts[target] = counts.get(target, 0) + 1
            seeds[target].append(("%s.%d" % (source, counts[target]), data))
        ip_packets.extend(dissector.ip_packets)

    for path in sorted(glob.glob(os.path.join(VECTORS, "*.hex"))):
        name = os.path.basename(path)[:-4]
        with open(path) as f:
            data = bytes.fromhex(f.read().strip())
        d = Dissector()
        getattr(d, hex_start(name))(data)
        take(name, d)
    for path in sorted(glob.glob(os.path.join(VECTORS, "*.pcap"))):
        stem = os.path.basename(path)[:-5]
        for i, frame in enumerate(read_pcap(path), 1):
            d = Dissector()
            d.ethernet(frame)
            take("%s-%d" % (stem, i), d, pcap=stem)
    for name, data in gue_seeds(ip_packets):
        seeds["gue"].append(("synth-" + name, data))

    for target, items in seeds.items():
        out = os.path.join(SEEDS, target)
        os.makedirs(out, exist_ok=True)
        for old in os.listdir(out):
            if not old.startswith("crash-"):
                os.remove(os.path.join(out, old))
        seen = set()
        for name, data in items:
            h = hashlib.sha1(data).digest()
            if h in seen:
                continue
            seen.add(h)
            # Names collide after the per-source counter only on duplicates,
            # which were dropped above; suffix the hash prefix anyway.
            fname = "%s-%s" % (name, h.hex()[:8])
            with open(os.path.join(out, fname), "wb") as f:
                f.write(data)
        print("%-8s %3d seeds" % (target, len(seen)))


if __name__ == "__main__":
    main()
