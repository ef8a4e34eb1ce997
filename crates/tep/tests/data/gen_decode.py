#!/usr/bin/python3
"""Builds decode_cases.pcap for crates/tep/tests/decode.rs with scapy.

Run with Debian's python3 (python3-scapy): /usr/bin/python3 gen_decode.py
Each frame is one case; the test refers to them by number (1-based):
 1 GTP-U G-PDU carrying IPv4/UDP 4789/VXLAN/Ethernet/IPv4/ICMP (tunnel in tunnel)
 2 FOU (no header) on UDP 5555 carrying IPv4/ICMP: needs --port 5555=fou-ipip
 3 GUE, Linux RCO encoding (hand-built header, no scapy layer exists), IPv4/UDP
 4 VXLAN over IPv6 with a zero UDP checksum (RFC 6935)
 5 VXLAN whose inner frame is cut short (UDP length says more than the IP packet holds)
 6 GTP-U G-PDU with an extension header of length 0 (malformed)
 7 Geneve with a critical option, inner Ethernet/IPv6/ICMPv6
 8 GRE-in-UDP with key, inner IPv4/TCP
"""
from scapy.all import Ether, IP, IPv6, UDP, TCP, ICMP, ICMPv6EchoRequest, Raw, GRE, wrpcap
from scapy.layers.vxlan import VXLAN
from scapy.contrib.gtp import GTP_U_Header
from scapy.contrib.geneve import GENEVE, GeneveOptions
import struct

E = lambda: Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
inner_eth = lambda: Ether(src="02:00:00:00:00:0a", dst="02:00:00:00:00:0b")
ping = lambda: IP(src="10.0.0.1", dst="10.0.0.2") / ICMP(id=1, seq=1) / Raw(b"tep-decode")

frames = []
# 1: GTP-U in which VXLAN rides.
vx = IP(src="172.16.0.1", dst="172.16.0.2") / UDP(sport=40000, dport=4789) / VXLAN(flags=0x08, vni=5000) / inner_eth() / ping()
frames.append(E() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=2152, dport=2152) / GTP_U_Header(teid=0x01020304, gtp_type=255) / vx)
# 2: FOU IPIP.
frames.append(E() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=50000, dport=5555) / ping())
# 3: GUE with Linux RCO: ver 0, C 0, hlen 2 | proto 4 (IPIP) | flags 0x0001 (PRIV)
#    | private flags 0x80000000 (REMCSUM) | start 20 (inner UDP after IPv4), offset 26.
inner_udp = IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1000, dport=2000) / Raw(b"x" * 30)
inner_bytes = bytearray(bytes(inner_udp))
# The RCO sender leaves the pseudo-header sum (not complemented) in the field.
src, dst = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
ulen = 8 + 30
s = sum(struct.unpack("!HHHH", src + dst)) + 17 + ulen
while s > 0xFFFF:
    s = (s & 0xFFFF) + (s >> 16)
inner_bytes[26:28] = struct.pack("!H", s)
gue = bytes([0x02, 4, 0x00, 0x01]) + struct.pack("!I", 0x80000000) + struct.pack("!HH", 20, 26)
frames.append(E() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=50001, dport=6080) / Raw(gue + bytes(inner_bytes)))
# 4: VXLAN over IPv6, zero UDP checksum.
f4 = E() / IPv6(src="2001:db8::1", dst="2001:db8::2") / UDP(sport=40001, dport=4789, chksum=0) / VXLAN(flags=0x08, vni=77) / inner_eth() / ping()
frames.append(f4)
# 5: VXLAN with its inner frame cut: the outer IP/UDP lengths are consistent,
#    but the inner IPv4 total length claims 200 bytes.
cut = bytearray(bytes(inner_eth() / ping()))
cut[14 + 2:14 + 4] = struct.pack("!H", 200)
frames.append(E() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=40002, dport=4789) / VXLAN(flags=0x08, vni=9) / Raw(bytes(cut)))
# 6: GTP-U G-PDU, E set, first extension type 0x85 with length 0.
bad = bytes([0x34, 0xFF]) + struct.pack("!H", 8) + struct.pack("!I", 7) + bytes([0, 0, 0, 0x85]) + bytes([0, 0, 0, 0])
frames.append(E() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=2152, dport=2152) / Raw(bad))
# 7: Geneve with one critical option.
opt = GeneveOptions(classid=0x0102, type=0x80, data=b"\x00\x00\x00\x01")
gen = GENEVE(vni=0xABCDE, proto=0x6558, critical=1, options=[opt])
frames.append(E() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=40003, dport=6081) / gen / inner_eth() / IPv6(src="fd00::1", dst="fd00::2") / ICMPv6EchoRequest(id=3, seq=4))
# 8: GRE-in-UDP with a key, inner TCP.
frames.append(E() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=49152, dport=4754) / GRE(key_present=1, key=0xBEEF, proto=0x0800) / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=1234, dport=80, flags="S", seq=1000))

wrpcap("decode_cases.pcap", frames)
print(f"wrote {len(frames)} frames")
