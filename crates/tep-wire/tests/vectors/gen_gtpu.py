#!/usr/bin/python3
"""Golden vectors for tep-wire's GTP-U v1 module (3GPP TS 29.281).
Run with /usr/bin/python3 (scapy 2.5).

Writes gtpu_<case>.hex (lowercase hex on one line, from the GTP-U header
on) beside itself, and gtpu.pcap with every case inside
Ethernet/IPv4/UDP 2152 for cross-checking with tshark:

  tshark -r gtpu.pcap -T fields -e gtp.teid -e gtp.message ...

Where scapy and tshark disagree, tshark wins (see the notes below).
"""
import os
from scapy.all import Ether, IP, IPv6, UDP, Raw, wrpcap
from scapy.contrib.gtp import (GTP_U_Header, GTPPDUSessionContainer,
                               GTP_UDPPort_ExtensionHeader,
                               GTP_PDCP_PDU_ExtensionHeader, GTPEchoRequest,
                               GTPEchoResponse, IE_Recovery,
                               GTPErrorIndication, IE_TEIDI, IE_GSNAddress,
                               GTPSupportedExtensionHeadersNotification)

HERE = os.path.dirname(os.path.abspath(__file__))

# A small IPv4/UDP T-PDU used as the G-PDU payload.
INNER = IP(src="10.45.0.2", dst="10.45.0.1", ttl=64, id=1) / UDP(
    sport=1000, dport=2000) / Raw(b"tep gtpu")

cases = {}

# Plain G-PDU: 8-byte header, no optional fields.
cases["gpdu_plain"] = GTP_U_Header(teid=0x11223344, gtp_type=255) / INNER

# G-PDU with S set: sequence 0x1234 (N-PDU and next type present but 0).
cases["gpdu_seq"] = GTP_U_Header(teid=0x55, gtp_type=255, S=1,
                                 seq=0x1234) / INNER

# G-PDU with a DL PDU Session Container (TS 38.415): QFI 9, RQI.
cases["gpdu_psc_dl"] = (
    GTP_U_Header(teid=0x01000001, gtp_type=255, E=1, next_ex=0x85)
    / GTPPDUSessionContainer(type=0, QFI=9, RQI=1, NextExtHdr=0) / INNER)

# DL PSC with PPP: the PPI octet follows, so the header is 8 bytes long.
cases["gpdu_psc_dl_ppp"] = (
    GTP_U_Header(teid=0x01000002, gtp_type=255, E=1, next_ex=0x85)
    / GTPPDUSessionContainer(type=0, QFI=5, PPP=1, PPI=3, NextExtHdr=0)
    / INNER)

# G-PDU with an UL PDU Session Container: QFI 1.
cases["gpdu_psc_ul"] = (
    GTP_U_Header(teid=0x02000001, gtp_type=255, E=1, next_ex=0x85)
    / GTPPDUSessionContainer(type=1, QFI=1, NextExtHdr=0) / INNER)

# G-PDU with two extensions: PDCP PDU number 0x0102, then DL PSC QFI 7.
cases["gpdu_pdcp_psc"] = (
    GTP_U_Header(teid=0x03000001, gtp_type=255, E=1, next_ex=0xC0)
    / GTP_PDCP_PDU_ExtensionHeader(pdcp_pdu=0x0102, next_ex=0x85)
    / GTPPDUSessionContainer(type=0, QFI=7, NextExtHdr=0) / INNER)

# Echo Request: TEID 0, S=1, sequence 7, no IEs.
cases["echo_request"] = GTP_U_Header(teid=0, gtp_type=1, S=1,
                                     seq=7) / GTPEchoRequest()

# Echo Response with Recovery (restart counter 0, TS 29.281 §8.2).
cases["echo_response"] = GTP_U_Header(teid=0, gtp_type=2, S=1, seq=7) / \
    GTPEchoResponse(IE_list=[IE_Recovery(restart_counter=0)])

# Error Indication, IPv4 peer, with the UDP Port extension header (0x40).
# IE_GSNAddress's automatic length is wrong in scapy 2.5 (it subtracts 2
# instead of 3), so the length is given.
cases["error_ind_v4"] = (
    GTP_U_Header(teid=0, gtp_type=26, S=1, seq=0x2a, E=1, next_ex=0x40)
    / GTP_UDPPort_ExtensionHeader(udp_port=2152, next_ex=0)
    / GTPErrorIndication(IE_list=[
        IE_TEIDI(TEIDI=0xdeadbeef),
        IE_GSNAddress(length=4, ipv4_address="192.0.2.10")]))

# Error Indication, IPv6 peer, no extension header.
cases["error_ind_v6"] = (
    GTP_U_Header(teid=0, gtp_type=26, S=1, seq=0x2b)
    / GTPErrorIndication(IE_list=[
        IE_TEIDI(TEIDI=0x00000102),
        IE_GSNAddress(length=16, ipv6_address="2001:db8::10")]))

# End Marker: TEID of the tunnel, no IEs.
cases["end_marker"] = GTP_U_Header(teid=0x01000001, gtp_type=254)

# Supported Extension Headers Notification listing 0x40, 0x85, 0xc0.
# scapy 2.5's IE_ExtensionHeaderList writes a 2-byte length, but
# TS 29.281 §8.5 (and tshark, decode_gtp_hdr_list) use a 1-byte length.
# scapy's form makes tshark report a 0-entry list and "Malformed Packet",
# so the IE is written as raw bytes in the spec's layout.
cases["sehn"] = GTP_U_Header(teid=0, gtp_type=31, S=1, seq=9) / Raw(
    bytes([141, 3, 0x40, 0x85, 0xc0]))

# The same with scapy's IE class (kept only in the pcap, to document the
# disagreement; no .hex file, no unit test).
from scapy.contrib.gtp import IE_ExtensionHeaderList  # noqa: E402
SCAPY_SEHN = GTP_U_Header(teid=0, gtp_type=31, S=1, seq=9) / \
    GTPSupportedExtensionHeadersNotification(
        IE_list=[IE_ExtensionHeaderList(extension_headers=[0x40, 0x85, 0xc0])])

pkts = []
for name, pkt in cases.items():
    raw = bytes(pkt)
    with open(os.path.join(HERE, "gtpu_%s.hex" % name), "w") as f:
        f.write(raw.hex() + "\n")
    pkts.append(raw)
pkts.append(bytes(SCAPY_SEHN))

frames = [
    Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
    / IP(src="192.0.2.1", dst="192.0.2.2")
    / UDP(sport=2152, dport=2152) / Raw(raw)
    for raw in pkts
]
wrpcap(os.path.join(HERE, "gtpu.pcap"), frames)
print("\n".join(cases))
