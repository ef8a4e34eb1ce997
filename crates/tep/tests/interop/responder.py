#!/usr/bin/python3
"""An outside tunnel peer for tep's interop tests (crates/tep/tests/interop.rs).

Runs in the peer namespace. It reads every frame of the underlay interface
(AF_PACKET), takes the UDP datagrams tep sends to its tunnel ports, parses
the tunnel header and the inner packet with scapy's layers (GRE, IP, IPv6,
ICMP, ICMPv6, contrib.gtp; GUE has no scapy layer: its 4-byte header is read
and written here by hand, draft-ietf-intarea-gue section 3.1), checks each
field against what the test configured tep to send, and answers an inner
ICMP echo request with an echo reply it builds itself, encapsulated back
whole (Ethernet, outer IP, UDP with scapy's checksum, or zero where asked).
It also sends GTP-U Echo Requests and G-PDUs to unknown TEIDs, and
checks tep's Echo Responses and Error Indications.

Usage: responder.py CONFIG.json. The config:
  iface      the underlay interface
  peer_mac   the MAC of tep's underlay interface (for the Echo Requests)
  deadline   seconds after which it stops whatever happens
  ports      [{port, kind, family, tep, me, tep_port, csum, reply_csum,
               key, gre_csum, teid, reply_teid, qfi, reply_qfi}]
             kind: gue gue-gre fou-ipip fou-sit fou-gre gre gtpu;
             csum: what tep sends, "full" (must verify) or "zero";
             reply_csum: "full", "zero" or "alternate";
             key: the GRE key tep sends and gets back (null: none);
             gre_csum: the replies carry a GRE checksum;
             gre_seq: the replies carry a GRE sequence number;
             variant: GUE's, 0 (default) or 1, both ways;
             bad_gre_copy: each reply is followed by a copy whose GRE
             checksum is wrong (counted as bad_copies);
             teid/qfi: what tep's G-PDUs must carry (qfi null: no PDU
             Session Container); reply_teid/reply_qfi: what the replies carry;
             reply_ext: null (no extension header), "psc", "psc-long" (with
             PPI and a QMP time stamp) or "pdcp+psc" (a chain of two).
  probes     [{kind, family, tep, me, sport, teid}]: GTP-U messages to tep
             from port sport, sent until answered (three times at most):
             kind "echo", an Echo Request (the Echo Response must come back
             to sport), or "unknown_teid", a G-PDU to TEID teid, which tep
             does not have (the Error Indication must come to port 2152).

It prints "ready" once it listens, then at the end (stdin closed, or the
deadline) one JSON line: {"ports": {"<family>/<port>": {"requests",
"replies", "other", "bad_copies", "errors"}}, "probes": [{"kind", "family",
"sent", "answers", "errors"}], "errors": [...]}. A mismatch is reported,
never fatal.
"""

import json
import os
import select
import socket
import struct
import sys
import time

from scapy.all import (  # noqa: E402
    GRE,
    ICMP,
    IP,
    UDP,
    Ether,
    ICMPv6EchoReply,
    ICMPv6EchoRequest,
    IPv6,
    Raw,
)
from scapy.contrib.gtp import (  # noqa: E402
    GTPEchoRequest,
    GTPEchoResponse,
    GTPErrorIndication,
    GTPHeader,
    GTPPDUSessionContainer,
    GTP_PDCP_PDU_ExtensionHeader,
    GTP_U_Header,
    IE_GSNAddress,
    IE_Recovery,
    IE_TEIDI,
)
from scapy.layers.inet import in4_chksum  # noqa: E402
from scapy.layers.inet6 import in6_chksum  # noqa: E402
from scapy.utils import checksum  # noqa: E402

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
# Linux socket options (not in Python's socket module).
SO_NO_CHECK = 11
UDP_NO_CHECK6_RX = 102
IPPROTO_GRE = 47
GTPU_PORT = 2152
MAX_ERRORS = 20


class Port:
    """One tunnel: what tep must send on it, and how to answer."""

    def __init__(self, c):
        self.c = c
        self.requests = 0
        self.replies = 0
        self.other = 0
        self.bad_copies = 0
        self.errors = []

    def error(self, msg):
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(msg)

    def report(self):
        return {
            "requests": self.requests,
            "replies": self.replies,
            "other": self.other,
            "bad_copies": self.bad_copies,
            "errors": self.errors,
        }


def outer_checksum_ok(ip, udp_bytes):
    """The outer UDP checksum verifies (scapy's pseudo-header sum)."""
    if isinstance(ip, IP):
        return in4_chksum(socket.IPPROTO_UDP, ip, udp_bytes) == 0
    return in6_chksum(socket.IPPROTO_UDP, ip, udp_bytes) == 0


def answer_inner(port, inner):
    """The echo reply to the inner packet `inner` (bytes), or None."""
    version = inner[0] >> 4 if inner else 0
    if version == 4:
        p = IP(inner)
        ihl = p.ihl * 4
        if checksum(inner[:ihl]) != 0:
            port.error("inner IPv4 header checksum 0x%04x does not verify" % p.chksum)
        if len(inner) != p.len:
            port.error("inner IPv4 length %d, datagram holds %d" % (p.len, len(inner)))
        if p.proto != 1 or p[ICMP].type != 8:
            return None
        if checksum(inner[ihl:p.len]) != 0:
            port.error("inner ICMP checksum 0x%04x does not verify" % p[ICMP].chksum)
        e = p[ICMP]
        return bytes(
            IP(src=p.dst, dst=p.src, ttl=64)
            / ICMP(type=0, id=e.id, seq=e.seq)
            / Raw(bytes(e.payload))
        )
    if version == 6:
        p = IPv6(inner)
        if len(inner) != 40 + p.plen:
            port.error("inner IPv6 payload length %d, datagram holds %d" % (p.plen, len(inner) - 40))
        if p.nh != 58 or ICMPv6EchoRequest not in p:
            return None
        if in6_chksum(58, p, inner[40 : 40 + p.plen]) != 0:
            port.error("inner ICMPv6 checksum does not verify")
        e = p[ICMPv6EchoRequest]
        return bytes(
            IPv6(src=p.dst, dst=p.src, hlim=64)
            / ICMPv6EchoReply(id=e.id, seq=e.seq, data=e.data)
        )
    port.error("inner packet of IP version %d" % version)
    return None


def ethertype_of(inner):
    return 0x86DD if inner[0] >> 4 == 6 else 0x0800


def parse_gre(port, b):
    """Checks the GRE header tep sent; returns its payload."""
    g = GRE(b)
    c = port.c
    if g.version != 0 or g.routing_present or g.recursion_control or g.flags:
        port.error("GRE version %d / reserved bits set: %r" % (g.version, bytes(b[:2])))
    if g.chksum_present:
        port.error("GRE checksum present (tep sends none)")
    if g.seqnum_present:
        port.error("GRE sequence number present (tep sends none)")
    if c.get("key") is None:
        if g.key_present:
            port.error("GRE key %d present, none configured" % g.key)
    elif not g.key_present or g.key != c["key"]:
        port.error("GRE key %s, want %d" % (g.key if g.key_present else "absent", c["key"]))
    inner = bytes(g.payload)
    if inner and g.proto != ethertype_of(inner):
        port.error("GRE protocol 0x%04x for an IPv%d payload" % (g.proto, inner[0] >> 4))
    return inner


def build_gre(port, reply, corrupt=False):
    c = port.c
    g = GRE(proto=ethertype_of(reply))
    if c.get("key") is not None:
        g.key_present = 1
        g.key = c["key"]
    if c.get("gre_csum"):
        # scapy computes the checksum over the GRE header and payload.
        g.chksum_present = 1
    if c.get("gre_seq"):
        # RFC 2890 sequence numbers, which tep does not send.
        g.seqnum_present = 1
        g.sequence_number = port.replies + 1
    b = bytes(g / Raw(reply))
    if corrupt:
        # The checksum field (bytes 4-5 when C is set), inverted.
        b = b[:4] + bytes([b[4] ^ 0xFF, b[5] ^ 0xFF]) + b[6:]
    return b


def parse_gue(port, b, want_proto=None):
    """Checks a GUE variant 0 data header; returns (proto, payload)."""
    if len(b) < 4:
        port.error("GUE header cut: %d bytes" % len(b))
        return None, b""
    ver, control, hlen = b[0] >> 6, (b[0] >> 5) & 1, b[0] & 0x1F
    proto, flags = b[1], struct.unpack("!H", b[2:4])[0]
    if ver != 0:
        port.error("GUE variant %d, want 0" % ver)
    if control:
        port.error("GUE control message")
    if hlen != 0 or flags != 0:
        port.error("GUE hlen %d flags 0x%04x: tep sends no optional fields here" % (hlen, flags))
    payload = b[4 + 4 * hlen :]
    if want_proto is not None and proto != want_proto:
        port.error("GUE protocol %d, want %d" % (proto, want_proto))
    elif want_proto is None and payload:
        want = 41 if payload[0] >> 4 == 6 else 4
        if proto != want:
            port.error("GUE protocol %d for an IPv%d payload" % (proto, payload[0] >> 4))
    return proto, payload


def gue_header(proto):
    # Variant 0, C = 0, hlen 0, protocol, no flags.
    return bytes([0, proto, 0, 0])


def parse_gtpu(port, b):
    """Checks a G-PDU from tep; returns its T-PDU (or None if not a G-PDU)."""
    c = port.c
    h = GTPHeader(b)
    if h.gtp_type != 255:
        return None
    if h.version != 1 or h.PT != 1:
        port.error("GTP-U version %d PT %d" % (h.version, h.PT))
    if h.teid != c["teid"]:
        port.error("TEID 0x%x, want 0x%x" % (h.teid, c["teid"]))
    if h.length != len(b) - 8:
        port.error("GTP-U length %d, datagram holds %d after the mandatory header" % (h.length, len(b) - 8))
    at = 8
    if h.E or h.S or h.PN:
        at = 12
    if c.get("qfi") is None:
        if h.E:
            port.error("extension header present, tep has no QFI configured")
    else:
        if not h.E or h.next_ex != 0x85:
            port.error("no PDU Session Container (E=%d next 0x%02x)" % (h.E, h.next_ex or 0))
        else:
            psc = h[GTPPDUSessionContainer]
            if psc.type != 1:
                port.error("PDU Session Container type %d, want 1 (UL)" % psc.type)
            if psc.QFI != c["qfi"]:
                port.error("QFI %d, want %d" % (psc.QFI, c["qfi"]))
            if psc.NextExtHdr != 0:
                port.error("a second extension header 0x%02x" % psc.NextExtHdr)
    # Walk the extension chain by its length fields (not by scapy's layers:
    # the T-PDU starts where the chain says).
    nxt = h.next_ex if h.E else 0
    while nxt:
        n = b[at] * 4
        if n == 0:
            port.error("extension header of length 0")
            return None
        nxt = b[at + n - 1]
        at += n
    return b[at:]


def build_gtpu(port, reply):
    c = port.c
    h = GTP_U_Header(teid=c["reply_teid"], gtp_type=255)
    ext = c.get("reply_ext")
    if ext is None:
        return bytes(h / Raw(reply))
    # A DL PDU SESSION INFORMATION (TS 38.415 §5.5.2.1), as a UPF sends.
    psc = GTPPDUSessionContainer(type=0, QFI=c["reply_qfi"])
    if ext == "psc-long":
        # With a PPI and a DL sending time stamp (QMP): 16 bytes, not 4.
        psc = GTPPDUSessionContainer(
            type=0, QFI=c["reply_qfi"], PPP=1, PPI=5, QMP=1, dlSendTime=0x0123456789ABCDEF
        )
    elif ext == "pdcp+psc":
        # A chain: PDCP PDU Number (0xC0, comprehension required), then
        # the container.
        h.E, h.next_ex = 1, 0xC0
        return bytes(h / GTP_PDCP_PDU_ExtensionHeader(pdcp_pdu=0x1234, next_ex=0x85) / psc / Raw(reply))
    return bytes(h / psc / Raw(reply))


def decapsulate(port, payload):
    """(tunnel payload -> inner packet, and a function building the reply's
    tunnel payload from the inner reply, its GRE checksum corrupted if
    asked)."""
    kind = port.c["kind"]
    if kind == "gue" and port.c.get("variant") == 1:
        # Variant 1: the inner IP packet right after UDP, no GUE header.
        if payload and payload[0] >> 6 != 1:
            port.error("GUE variant %d, want 1 (no header)" % (payload[0] >> 6))
        return payload, lambda r, bad=False: r
    if kind == "gue":
        proto, inner = parse_gue(port, payload)
        return inner, lambda r, bad=False: gue_header(41 if r[0] >> 4 == 6 else 4) + r
    if kind == "gue-gre":
        _, gre = parse_gue(port, payload, IPPROTO_GRE)
        inner = parse_gre(port, gre)
        return inner, lambda r, bad=False: gue_header(IPPROTO_GRE) + build_gre(port, r, bad)
    if kind in ("gre", "fou-gre"):
        return parse_gre(port, payload), lambda r, bad=False: build_gre(port, r, bad)
    if kind in ("fou-ipip", "fou-sit"):
        want = 4 if kind == "fou-ipip" else 6
        if payload and payload[0] >> 4 != want:
            port.error("%s carried IPv%d" % (kind, payload[0] >> 4))
        return payload, lambda r, bad=False: r
    if kind == "gtpu":
        return parse_gtpu(port, payload), lambda r, bad=False: build_gtpu(port, r)
    raise ValueError("unknown kind " + kind)


class Responder:
    def __init__(self, config):
        self.config = config
        self.iface = config["iface"]
        with open("/sys/class/net/%s/address" % self.iface) as f:
            self.mac = f.read().strip()
        self.ports = {}
        for c in config["ports"]:
            self.ports[(c["family"], c["port"])] = Port(c)
        self.errors = []
        self.probes = [
            {"c": p, "sent": 0, "answers": 0, "errors": [], "seq": 0x4000 + i, "last": 0.0}
            for i, p in enumerate(config.get("probes", []))
        ]
        self.raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.raw.bind((self.iface, 0))
        self.raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        # Sockets on the tunnel ports: the kernel then neither answers tep's
        # datagrams with ICMP port unreachable nor drops zero checksums over
        # IPv6 before counting them. What they receive is thrown away.
        self.sinks = []
        bound = set()
        listen = [(c["family"], c["me"], c["port"]) for c in config["ports"]]
        listen += [(p["family"], p["me"], p["sport"]) for p in config.get("probes", [])]
        listen += [(p["family"], p["me"], GTPU_PORT) for p in config.get("probes", [])]
        for family, me, port in listen:
            if (me, port) in bound:
                continue
            bound.add((me, port))
            fam = socket.AF_INET if family == 4 else socket.AF_INET6
            s = socket.socket(fam, socket.SOCK_DGRAM)
            if fam == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_UDP, UDP_NO_CHECK6_RX, 1)
            s.bind((me, port))
            s.setblocking(False)
            self.sinks.append(s)

    def send(self, dst_mac, family, src, dst, sport, dport, payload, zero):
        ip = IP(src=src, dst=dst, ttl=64) if family == 4 else IPv6(src=src, dst=dst, hlim=64)
        udp = UDP(sport=sport, dport=dport)
        if zero:
            udp.chksum = 0
        self.raw.send(bytes(Ether(src=self.mac, dst=dst_mac) / ip / udp / Raw(payload)))

    def send_probe(self, p):
        """A GTP-U Echo Request, or a G-PDU to a TEID tep does not have."""
        c = p["c"]
        if c["kind"] == "echo":
            msg = GTPHeader(gtp_type=1, S=1, seq=p["seq"], teid=0) / GTPEchoRequest()
        else:
            inner = IP(src="10.99.0.1", dst="10.99.0.2") / ICMP(type=8, id=1, seq=p["sent"])
            msg = GTP_U_Header(gtp_type=255, teid=c["teid"]) / inner
        self.send(self.config["peer_mac"], c["family"], c["me"], c["tep"], c["sport"], GTPU_PORT, bytes(msg), False)
        p["sent"] += 1
        p["last"] = time.monotonic()

    def probe_answer(self, family, src, dport, b):
        """Takes tep's answer to a probe; False if it answers none."""
        if len(b) < 8 or b[0] >> 5 != 1 or b[1] not in (2, 26):
            return False
        for p in self.probes:
            c = p["c"]
            # TS 29.281 §4.4.2: an Echo Response goes to the request's
            # source port, an Error Indication to port 2152.
            want = (2, c["sport"]) if c["kind"] == "echo" else (26, GTPU_PORT)
            if c["family"] != family or c["tep"] != src or (b[1], dport) != want:
                continue
            errs = p["errors"]
            h = GTPHeader(b)
            name = "Echo Response" if b[1] == 2 else "Error Indication"
            if h.version != 1 or h.PT != 1 or h.teid != 0 or not h.S or h.E or h.PN:
                errs.append(
                    "%s header: version %d PT %d TEID %d E %d S %d PN %d"
                    % (name, h.version, h.PT, h.teid, h.E, h.S, h.PN)
                )
            if h.length != len(b) - 8:
                errs.append("%s length %d, datagram %d" % (name, h.length, len(b) - 8))
            if b[1] == 2:
                if h.seq != p["seq"]:
                    errs.append("Echo Response sequence 0x%x, want 0x%x" % (h.seq, p["seq"]))
                if GTPEchoResponse not in h:
                    errs.append("not an Echo Response to scapy: %r" % h)
                else:
                    ies = h[GTPEchoResponse].IE_list
                    rec = [ie for ie in ies if isinstance(ie, IE_Recovery)]
                    if len(rec) != 1 or rec[0].restart_counter != 0:
                        errs.append("Recovery IE: %r" % ies)
            else:
                if GTPErrorIndication not in h:
                    errs.append("not an Error Indication to scapy: %r" % h)
                else:
                    ies = h[GTPErrorIndication].IE_list
                    teid = [ie.TEIDI for ie in ies if isinstance(ie, IE_TEIDI)]
                    peer = [
                        ie.ipv4_address if ie.length == 4 else ie.ipv6_address
                        for ie in ies
                        if isinstance(ie, IE_GSNAddress)
                    ]
                    if teid != [c["teid"]]:
                        errs.append("TEID Data I %r, want [%d]" % (teid, c["teid"]))
                    # The address the erroneous G-PDU was sent to.
                    if peer != [c["tep"]]:
                        errs.append("GTP-U Peer Address %r, want [%s]" % (peer, c["tep"]))
            p["answers"] += 1
            return True
        return False

    def frame(self, data):
        eth = Ether(data)
        # The layer right after Ethernet: `IP in eth` would also find an
        # inner IPv4 packet under an outer IPv6 one.
        ip = eth.payload
        if isinstance(ip, IP):
            family = 4
            if ip.proto != 17 or ip.frag or ip.flags.MF:
                return
            udp_bytes = bytes(ip.payload)[: ip.len - ip.ihl * 4]
        elif isinstance(ip, IPv6):
            family = 6
            if ip.nh != 17:
                return
            udp_bytes = bytes(ip.payload)[: ip.plen]
        else:
            return
        if len(udp_bytes) < 8:
            return
        sport, dport, ulen, csum = struct.unpack("!HHHH", udp_bytes[:8])
        if self.probe_answer(family, ip.src, dport, udp_bytes[8:]):
            return
        port = self.ports.get((family, dport))
        if port is None or ip.dst != port.c["me"] or ip.src != port.c["tep"]:
            return
        c = port.c
        if ulen != len(udp_bytes):
            port.error("UDP length %d, datagram %d" % (ulen, len(udp_bytes)))
        if c["csum"] == "zero":
            if csum != 0:
                port.error("outer UDP checksum 0x%04x, tep was configured for zero" % csum)
        elif csum == 0:
            port.error("outer UDP checksum zero, tep was configured for full")
        elif not outer_checksum_ok(ip, udp_bytes):
            port.error("outer UDP checksum 0x%04x does not verify" % csum)
        payload = udp_bytes[8:]
        port.requests += 1
        inner, encap = decapsulate(port, payload)
        if not inner:
            port.other += 1
            return
        reply = answer_inner(port, inner)
        if reply is None:
            port.other += 1
            return
        mode = c["reply_csum"]
        zero = mode == "zero" or (mode == "alternate" and port.replies % 2 == 1)
        self.send(eth.src, family, c["me"], c["tep"], c["port"], c["tep_port"], encap(reply), zero)
        port.replies += 1
        if c.get("bad_gre_copy"):
            # The same reply again with a wrong GRE checksum (and a right
            # outer one): tep must drop it.
            self.send(eth.src, family, c["me"], c["tep"], c["port"], c["tep_port"], encap(reply, True), zero)
            port.bad_copies += 1

    def run(self):
        deadline = time.monotonic() + self.config["deadline"]
        for p in self.probes:
            self.send_probe(p)
        print("ready", flush=True)
        stdin = sys.stdin.fileno()
        watch = [self.raw, stdin] + self.sinks
        while True:
            now = time.monotonic()
            if now >= deadline:
                self.errors.append("deadline reached before the test closed stdin")
                break
            # Probes unanswered after three seconds are sent again (three times
            # at most).
            for p in self.probes:
                if p["answers"] == 0 and p["sent"] < 3 and now - p["last"] > 3.0:
                    self.send_probe(p)
            ready, _, _ = select.select(watch, [], [], min(0.2, deadline - now))
            if stdin in ready:
                if not os.read(stdin, 4096):
                    break
            for s in self.sinks:
                if s in ready:
                    try:
                        while s.recv(65535):
                            pass
                    except BlockingIOError:
                        pass
            if self.raw in ready:
                for _ in range(64):
                    try:
                        data, addr = self.raw.recvfrom(65535, socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        break
                    if addr[2] == PACKET_OUTGOING:
                        continue
                    try:
                        self.frame(data)
                    except Exception as exc:  # a parse failure is a finding
                        self.errors.append("frame %s: %r" % (data[:64].hex(), exc))
        # What is still queued arrived before the test said stop.
        while True:
            try:
                data, addr = self.raw.recvfrom(65535, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            if addr[2] != PACKET_OUTGOING:
                try:
                    self.frame(data)
                except Exception as exc:
                    self.errors.append("frame %s: %r" % (data[:64].hex(), exc))
        report = {
            "ports": {"%d/%d" % k: p.report() for k, p in self.ports.items()},
            "probes": [
                {
                    "kind": p["c"]["kind"],
                    "family": p["c"]["family"],
                    "sent": p["sent"],
                    "answers": p["answers"],
                    "errors": p["errors"],
                }
                for p in self.probes
            ],
            "errors": self.errors[:MAX_ERRORS],
        }
        print(json.dumps(report), flush=True)


def main():
    with open(sys.argv[1]) as f:
        config = json.load(f)
    Responder(config).run()


if __name__ == "__main__":
    main()
