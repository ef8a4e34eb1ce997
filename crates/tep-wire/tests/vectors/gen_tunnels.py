#!/usr/bin/python3
"""Golden vectors for the tunnel headers of tep-wire (gre, geneve, vxlan).
Run with /usr/bin/python3 (scapy 2.5).

Writes tunnel_<case>.hex beside itself: one packet, lowercase hex on one
line, starting at the tunnel header (GRE / Geneve / VXLAN) and including the
payload. Also writes tunnels.pcap with every case behind Ethernet/IPv4
(/UDP) so tshark can dissect them:

    tshark -r tunnels.pcap -V -d udp.port==4754,gre
"""
import os
from scapy.all import Ether, IP, UDP, ICMP, Raw, wrpcap
from scapy.layers.l2 import GRE
from scapy.layers.vxlan import VXLAN
from scapy.contrib.geneve import GENEVE, GeneveOptions

HERE = os.path.dirname(os.path.abspath(__file__))

OUTER_ETH = Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
OUTER_IP = dict(src="192.0.2.1", dst="198.51.100.2", id=1, ttl=64)
INNER_IP = (IP(src="10.0.0.1", dst="10.0.0.2", id=7, ttl=63)
            / ICMP(type=8, id=0x1234, seq=1) / Raw(b"tep tunnel test!"))
INNER_ETH = (Ether(dst="02:00:00:00:00:0b", src="02:00:00:00:00:0a")
             / INNER_IP)

cases = {}
frames = []

# GRE with C, K and S; scapy fills the RFC 2784 checksum over GRE header +
# payload because chksum is left unset.
gre_cks = GRE(chksum_present=1, key_present=1, seqnum_present=1,
              proto=0x0800, key=0x01020304, sequence_number=42) / INNER_IP
cases["gre_cks"] = gre_cks
frames.append(OUTER_ETH / IP(proto=47, **OUTER_IP) / gre_cks)

# Plain GRE carrying Ethernet (transparent Ethernet bridging, 0x6558).
gre_plain = GRE(proto=0x6558) / INNER_ETH
cases["gre_plain"] = gre_plain
frames.append(OUTER_ETH / IP(proto=47, **OUTER_IP) / gre_plain)

# GRE-in-UDP (RFC 8086, port 4754) with a key, carrying IPv4.
gre_udp = GRE(key_present=1, proto=0x0800, key=0x00abcdef) / INNER_IP
cases["gre_udp"] = gre_udp
frames.append(OUTER_ETH / IP(**OUTER_IP) / UDP(sport=49152, dport=4754)
              / gre_udp)

# Geneve with two options: a non-critical 4-byte one and a critical 8-byte
# one (type high bit set => C bit in the base header as RFC 8926 asks).
geneve_opts = GENEVE(vni=0x123456, proto=0x6558, critical=1, options=[
    GeneveOptions(classid=0x0102, type=0x03, data=b"\xaa\xbb\xcc\xdd"),
    GeneveOptions(classid=0xffff, type=0x81,
                  data=b"\x01\x02\x03\x04\x05\x06\x07\x08"),
]) / INNER_ETH
cases["geneve_opts"] = geneve_opts
frames.append(OUTER_ETH / IP(**OUTER_IP) / UDP(sport=49153, dport=6081)
              / geneve_opts)

geneve_plain = GENEVE(vni=42, proto=0x6558) / INNER_ETH
cases["geneve_plain"] = geneve_plain
frames.append(OUTER_ETH / IP(**OUTER_IP) / UDP(sport=49154, dport=6081)
              / geneve_plain)

vxlan_plain = VXLAN(flags="Instance", vni=42) / INNER_ETH
cases["vxlan_plain"] = vxlan_plain
frames.append(OUTER_ETH / IP(**OUTER_IP) / UDP(sport=49155, dport=4789)
              / vxlan_plain)

# VXLAN-GBP: G flag, D ("don't learn") and A ("policy applied"), group 0x1234.
vxlan_gbp = VXLAN(flags="G+Instance", gpflags="D+A", gpid=0x1234,
                  vni=0xabcdef) / INNER_ETH
cases["vxlan_gbp"] = vxlan_gbp
frames.append(OUTER_ETH / IP(**OUTER_IP) / UDP(sport=49156, dport=4789)
              / vxlan_gbp)

for name, pkt in cases.items():
    with open(os.path.join(HERE, f"tunnel_{name}.hex"), "w") as f:
        f.write(bytes(pkt).hex() + "\n")
wrpcap(os.path.join(HERE, "tunnels.pcap"), frames)
