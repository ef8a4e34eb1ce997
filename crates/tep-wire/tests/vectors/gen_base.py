#!/usr/bin/python3
"""Golden vectors for the base formats of tep-wire (ethernet, ipv4, ipv6,
udp, tcp, icmpv4, icmpv6). Run with /usr/bin/python3 (scapy 2.5).

Writes base_<case>.hex (one packet, lowercase hex on one line) beside itself.
"""
import os
from scapy.all import (Ether, Dot1Q, IP, IPv6, IPv6ExtHdrHopByHop,
                       IPv6ExtHdrFragment, TCP, UDP, ICMP, ICMPv6PacketTooBig,
                       Raw, PadN)

HERE = os.path.dirname(os.path.abspath(__file__))

cases = {}

# Ethernet / IPv4 with options (NOP NOP + 4-byte record route-ish via raw) / TCP with options.
cases["eth_ipv4opt_tcpopt"] = (
    Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
    / IP(src="192.0.2.1", dst="198.51.100.2", ttl=61, id=0x1234, flags="DF",
         tos=0xb9, options=b"\x01\x01\x01\x00")
    / TCP(sport=40000, dport=443, seq=0x01020304, ack=0x0a0b0c0d,
          flags="PA", window=502, urgptr=0,
          options=[("MSS", 1460), ("NOP", None), ("WScale", 7),
                   ("SAckOK", b""), ("Timestamp", (123456, 654321)),
                   ("NOP", None), ("NOP", None),
                   ("SAck", (1000, 2000))])
    / Raw(b"hello tep")
)

# Ethernet / 802.1Q / IPv6 / hop-by-hop / fragment / UDP.
cases["eth_vlan_ipv6_hbh_frag_udp"] = (
    Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
    / Dot1Q(prio=5, id=1, vlan=100)
    / IPv6(src="2001:db8::1", dst="2001:db8::2", tc=0x2e, fl=0x12345, hlim=63)
    / IPv6ExtHdrHopByHop(options=[PadN(optdata=b"\x00\x00\x00\x00")])
    / IPv6ExtHdrFragment(offset=0, m=1, id=0xdeadbeef)
    / UDP(sport=5555, dport=4789)
    / Raw(b"0123456789abcdef")
)

# IPv4 / UDP with a valid checksum.
cases["ipv4_udp_csum"] = (
    IP(src="10.200.0.1", dst="10.200.0.2", ttl=64, id=7)
    / UDP(sport=12345, dport=6081)
    / Raw(b"geneve-ish payload")
)

# IPv6 / UDP with a zero checksum (RFC 6935 tunnel style).
cases["ipv6_udp_zero"] = (
    IPv6(src="fd00::1", dst="fd00::2", hlim=64)
    / UDP(sport=33333, dport=4789, chksum=0)
    / Raw(b"vxlan-ish payload!")
)

# ICMPv4 destination unreachable, fragmentation needed, next-hop MTU 1400,
# quoting an IPv4/UDP header.
cases["icmpv4_frag_needed"] = (
    IP(src="192.0.2.254", dst="192.0.2.1", ttl=64)
    / ICMP(type=3, code=4, nexthopmtu=1400)
    / IP(src="192.0.2.1", dst="198.51.100.2", flags="DF", len=1500)
    / UDP(sport=40000, dport=4789, len=1480)
)

# ICMPv6 packet too big, MTU 1280, quoting an IPv6/UDP header.
cases["icmpv6_ptb"] = (
    IPv6(src="2001:db8::fe", dst="2001:db8::1", hlim=64)
    / ICMPv6PacketTooBig(mtu=1280)
    / IPv6(src="2001:db8::1", dst="2001:db8::2", plen=1452)
    / UDP(sport=40000, dport=4789, len=1452)
)

for name, p in cases.items():
    raw = bytes(p)
    with open(os.path.join(HERE, f"base_{name}.hex"), "w") as f:
        f.write(raw.hex() + "\n")
    print(name, len(raw))
