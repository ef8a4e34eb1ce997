#!/usr/bin/python3
"""An SMF, two gNBs and a data-network host around tep as a 5G UPF
(crates/tep/tests/upf.rs): the other ends of N4 (PFCP), N3 (GTP-U) and N6.

Every PFCP message is built and dissected by scapy's contrib/pfcp.py, every
G-PDU by contrib/gtp.py (GTP_U_Header, GTPPDUSessionContainer) around
scapy's IP/UDP; the bytes are only cut by hand where a message must be
malformed. tep-pfcp is checked against the same scapy module in
crates/tep-pfcp/tests/scapy.rs; this process checks the daemon that runs
it: what the SMF's requests do to packets.

Usage: smf.py CONFIG.json, started inside the RAN namespace. The config:
  dn_ns       the data network's namespace (the N6 socket is opened there)
  upf         tep's N3 and N4 address
  node_id     the Node ID tep must answer with (an FQDN)
  smf         the SMF's address (N4, port 8805), in the RAN namespace
  gnbs        [address, address]: two gNBs' N3 addresses (port 2152)
  dn          the data-network host's address, dn_port its UDP port
  ue_base     the first UE address; session i has ue_base + i
  deadline    seconds after which it gives up whatever happens
  stranger    optional: another host's address on N4 (in tep's peers,
              owning none of the SMF's sessions)
  outsider    optional: an address on N4 that is not in tep's peers

It prints {"ready": true} once its sockets are open, then runs one command
per line of stdin ({"run": NAME, ...}) and prints one JSON line per
command: {"run": NAME, "ok": true, ...numbers}. On a mismatch it prints
{"run": NAME, "ok": false, "error": WHAT} and exits 1. stdin closed: exit 0.
"""

import contextlib
import ctypes
import json
import os
import select
import socket
import struct
import sys
import time

from scapy.contrib.gtp import (
    GTPEchoResponse,
    GTPErrorIndication,
    GTPHeader,
    GTPPDUSessionContainer,
    GTP_U_Header,
    IE_GSNAddress,
    IE_Recovery,
    IE_TEIDI,
)
from scapy.contrib.pfcp import (
    PFCP,
    IE_ApplyAction,
    IE_BAR_Id,
    IE_Create_BAR,
    IE_DownlinkDataNotificationDelay,
    IE_Cause,
    IE_CreatedPDR,
    IE_CreateFAR,
    IE_CreatePDR,
    IE_CreateQER,
    IE_CreateURR,
    IE_DestinationInterface,
    IE_DownlinkDataReport,
    IE_EndTime,
    IE_ErrorIndicationReport,
    IE_FailedRuleId,
    IE_FAR_Id,
    IE_ForwardingParameters,
    IE_FSEID,
    IE_FTEID,
    IE_GateStatus,
    IE_GBR,
    IE_MBR,
    IE_DurationMeasurement,
    IE_MeasurementMethod,
    IE_MeasurementPeriod,
    IE_NetworkInstance,
    IE_NodeId,
    IE_NodeReportType,
    IE_NotImplemented,
    IE_OffendingIE,
    IE_OuterHeaderCreation,
    IE_OuterHeaderRemoval,
    IE_PDI,
    IE_PDNType,
    IE_PDR_Id,
    IE_PFCPSMReqFlags,
    IE_Precedence,
    IE_QER_Id,
    IE_QERCorrelationId,
    IE_SDF_Filter,
    IE_QFI,
    IE_QueryURR,
    IE_RecoveryTimeStamp,
    IE_RemoteGTP_U_Peer,
    IE_ReportingTriggers,
    IE_ReportType,
    IE_SourceInterface,
    IE_SuggestedBufferingPacketsCount,
    IE_StartTime,
    IE_TransportLevelMarking,
    IE_UE_IP_Address,
    IE_UPFunctionFeatures,
    IE_UpdateFAR,
    IE_UpdateForwardingParameters,
    IE_UpdateQER,
    IE_UpdateURR,
    IE_UR_SEQN,
    IE_URR_Id,
    IE_UsageReport_SDR,
    IE_UsageReport_SMR,
    IE_UsageReport_SRR,
    IE_UsageReportTrigger,
    IE_UserPlanePathFailureReport,
    IE_VolumeMeasurement,
    IE_VolumeQuota,
    IE_VolumeThreshold,
    PFCPAssociationReleaseRequest,
    PFCPAssociationSetupRequest,
    PFCPHeartbeatRequest,
    PFCPHeartbeatResponse,
    PFCPNodeReportResponse,
    PFCPSessionDeletionRequest,
    PFCPSessionEstablishmentRequest,
    PFCPSessionModificationRequest,
    PFCPSessionReportResponse,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Raw

PFCP_PORT = 8805
GTPU_PORT = 2152
CLONE_NEWNET = 0x40000000
# AF_PACKET (linux/if_packet.h, linux/if_ether.h): every protocol, and the
# auxiliary data where the kernel leaves a received frame's VLAN tag.
ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID = 0x10
# Seconds from 1900 (the Recovery Time Stamp's epoch) to 1970.
NTP_UNIX = 2208988800
QFI = 9
# The I-UPF's N9 uplink FAR's Transport Level Marking (EF).
N9_DSCP = 46
# Datagrams sent ahead of those received (see Lab.window).
WINDOW = 64
# Message types (TS 29.244 Table 7.3-1) this SMF sees.
HEARTBEAT_REQUEST, HEARTBEAT_RESPONSE = 1, 2
NODE_REPORT_REQUEST = 12
# GTP-U message types (TS 29.281 Table 6.1-1).
GTPU_ECHO_REQUEST, GTPU_ERROR_INDICATION = 1, 26
ASSOCIATION_SETUP_RESPONSE, ASSOCIATION_RELEASE_RESPONSE = 6, 10
ESTABLISHMENT_RESPONSE, MODIFICATION_RESPONSE, DELETION_RESPONSE = 51, 53, 55
REPORT_REQUEST = 56
# Causes (§8.2.1).
REJECTED = 64
ACCEPTED, NOT_FOUND, IE_MISSING, INVALID_LENGTH, NO_ASSOCIATION, RULE_FAILURE = 1, 65, 66, 68, 72, 73


class Mismatch(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Mismatch(what)


def enter_netns(path):
    """setns(2) into the network namespace at `path` (Python 3.11 has no
    os.setns): sockets opened afterwards live there, and keep living there
    after switching back."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "setns %s: %s" % (path, os.strerror(e)))
    finally:
        os.close(fd)


def udp_socket(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # A thousand datagrams may arrive before the loop reads them.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    s.bind((addr, port))
    s.setblocking(False)
    return s


def ies(msg, cls):
    return [ie for ie in (getattr(msg, "IE_list", None) or []) if isinstance(ie, cls)]


def one_ie(msg, cls, where):
    found = ies(msg, cls)
    check(len(found) == 1, "%s: %d %s IEs, want 1: %r" % (where, len(found), cls.__name__, msg))
    return found[0]


def fqdn(node_id):
    """The FQDN of a Node ID IE (scapy dissects it to bytes)."""
    check(node_id.id_type == 2, "Node ID %r is no FQDN" % node_id)
    v = node_id.id
    return v.decode() if isinstance(v, bytes) else str(v)


def ipv4_add(base, n):
    return socket.inet_ntoa(struct.pack("!I", struct.unpack("!I", socket.inet_aton(base))[0] + n))


# Seconds from 1900 (PFCP's times, NTP era 0) to 1970.
NTP_UNIX_OFFSET = 2_208_988_800


def volume(vm):
    """(bytes total, up, down; packets total, up, down) of a Volume
    Measurement. scapy 2.5 knows only the volume flags of octet 5 (TOVOL,
    ULVOL, DLVOL): the packet-count flags of Release 15 (TONOP bit 4,
    ULNOP bit 5, DLNOP bit 6) land in its `spare` bits and their 8-octet
    counts in extra_data, in that order (TS 29.244 §8.2.40)."""
    check(vm.TOVOL and vm.ULVOL and vm.DLVOL, "volume flags %r" % vm)
    nop = vm.spare & 0x7
    check(nop == 0x7, "packet count flags 0x%x (want TONOP, ULNOP, DLNOP)" % nop)
    extra = bytes(vm.extra_data or b"")
    check(len(extra) == 24, "%d octets of packet counts, want 24" % len(extra))
    tp, up, dp = struct.unpack("!QQQ", extra)
    return (vm.total, vm.uplink, vm.downlink, tp, up, dp)


class Session:
    def __init__(self, index, cfg, gnb):
        self.index = index
        self.ue = ipv4_add(cfg["ue_base"], index)
        self.cp_seid = 0x5000_0000 + index
        self.dl_teid = 0x0100_0000 + index
        self.gnb = gnb
        self.up_seid = None
        self.ul_teid = None
        # What tep must have counted since the last usage report: inner
        # packets delivered, and their bytes.
        self.ul = [0, 0]
        self.dl = [0, 0]
        self.port = 10000 + index % 50000


class Lab:
    def __init__(self, cfg):
        self.cfg = cfg
        self.upf = cfg["upf"]
        self.smf = cfg["smf"]
        self.gnbs = cfg["gnbs"]
        self.dn = cfg["dn"]
        self.dn_port = cfg["dn_port"]
        self.deadline = time.monotonic() + cfg["deadline"]
        self.recovery = int(time.time()) + NTP_UNIX
        self.seq = 100
        self.sessions = {}
        # PFCP responses by sequence number: (bytes, dissected).
        self.responses = {}
        # Session Report Requests from tep, unanswered; when each came
        # (monotonic), by sequence number.
        self.reports = []
        self.report_times = {}
        # When each response came (wall clock), by sequence number: what
        # a usage report's End Time is checked against.
        self.arrived = {}
        self.heartbeats_answered = 0
        # tep's Node Report Requests (answered as they come): (time, dissected).
        self.node_reports = []
        # Path supervision: tep's Echo Requests per gNB, and the gNBs that
        # leave them unanswered.
        self.echo_requests = {}
        self.silent_gnbs = set()
        self.retransmissions = 0
        self.tep_recovery = None
        here = "/proc/self/ns/net"
        home = os.open(here, os.O_RDONLY)
        enter_netns("/var/run/netns/" + cfg["dn_ns"])
        self.dn_sock = udp_socket(self.dn, self.dn_port)
        libc = ctypes.CDLL(None, use_errno=True)
        check(libc.setns(home, CLONE_NEWNET) == 0, "setns back")
        os.close(home)
        self.n4 = udp_socket(self.smf, PFCP_PORT)
        self.gnb_socks = [udp_socket(a, GTPU_PORT) for a in self.gnbs]
        self.stranger = udp_socket(cfg["stranger"], PFCP_PORT) if "stranger" in cfg else None
        self.outsider = udp_socket(cfg["outsider"], PFCP_PORT) if "outsider" in cfg else None

    # -- PFCP ---------------------------------------------------------------

    def next_seq(self):
        self.seq += 1
        return self.seq

    def left(self):
        t = self.deadline - time.monotonic()
        check(t > 0, "deadline passed")
        return t

    def pump(self, timeout):
        """Reads what tep sent on N4 within `timeout`: responses are kept by
        sequence number, its Heartbeat Requests answered, its Session Report
        Requests queued."""
        r, _, _ = select.select([self.n4], [], [], max(0, min(timeout, self.left())))
        while r:
            try:
                data, src = self.n4.recvfrom(65535)
            except BlockingIOError:
                return
            # The UPF, or the PSA behind it on N9 (cmd_n9).
            check(src[1] == PFCP_PORT and src[0] in (self.cfg["upf"], self.cfg.get("psa")),
                  "PFCP from %r" % (src,))
            p = PFCP(data)
            t = p.message_type
            if t == HEARTBEAT_REQUEST:
                ts = one_ie(p.payload, IE_RecoveryTimeStamp, "tep's Heartbeat Request")
                if self.tep_recovery is not None and src[0] == self.upf:
                    check(ts.timestamp == self.tep_recovery, "tep's Recovery Time Stamp changed")
                rsp = PFCP(version=1, S=0, seq=p.seq) / PFCPHeartbeatResponse(
                    IE_list=[IE_RecoveryTimeStamp(timestamp=self.recovery)]
                )
                self.n4.sendto(bytes(rsp), src)
                self.heartbeats_answered += 1
            elif t == REPORT_REQUEST:
                self.reports.append((data, p))
                self.report_times[p.seq] = time.monotonic()
            elif t == NODE_REPORT_REQUEST:
                self.node_reports.append((time.monotonic(), p))
                rsp = PFCP(version=1, S=0, seq=p.seq) / PFCPNodeReportResponse(IE_list=[
                    IE_NodeId(id_type="FQDN", id="smf.test"),
                    IE_Cause(cause=ACCEPTED),
                ])
                self.n4.sendto(bytes(rsp), src)
            else:
                self.responses.setdefault(p.seq, []).append((data, p))
                self.arrived[p.seq] = time.time()
            r, _, _ = select.select([self.n4], [], [], 0)

    def exchange(self, msgs, window=64, resend=2.0):
        """Sends requests [(seq, bytes)], at most `window` unanswered at a
        time, each resent after `resend` s (same bytes, same sequence
        number) until answered; returns {seq: (bytes, dissected)}."""
        todo = list(reversed(msgs))
        out = {}
        flight = {}
        while todo or flight:
            while todo and len(flight) < window:
                seq, b = todo.pop()
                self.n4.sendto(b, (self.upf, PFCP_PORT))
                flight[seq] = (b, time.monotonic())
            self.pump(0.05)
            now = time.monotonic()
            for seq in list(flight):
                got = self.responses.pop(seq, None)
                if got:
                    check(len(got) == 1, "seq %d answered %d times" % (seq, len(got)))
                    out[seq] = got[0]
                    del flight[seq]
                elif now - flight[seq][1] > resend:
                    self.n4.sendto(flight[seq][0], (self.upf, PFCP_PORT))
                    flight[seq] = (flight[seq][0], now)
                    self.retransmissions += 1
        return out

    def request(self, pkt):
        seq = pkt.seq
        return self.exchange([(seq, bytes(pkt))])[seq]

    def header(self, seid=None):
        seq = self.next_seq()
        if seid is None:
            return PFCP(version=1, S=0, seq=seq)
        return PFCP(version=1, S=1, seid=seid, seq=seq)

    def expect_response(self, got, mtype, seid, cause, where):
        data, p = got
        check(p.version == 1, "%s: version %d" % (where, p.version))
        check(p.message_type == mtype, "%s: message type %d, want %d" % (where, p.message_type, mtype))
        check(p.length == len(data) - 4, "%s: length %d of %d octets" % (where, p.length, len(data)))
        if seid is None:
            check(p.S == 0, "%s: S=1 on a node message" % where)
        else:
            check(p.S == 1 and p.seid == seid, "%s: SEID %r, want 0x%x" % (where, p.seid if p.S else None, seid))
        c = one_ie(p.payload, IE_Cause, where).cause
        check(c == cause, "%s: cause %d, want %d" % (where, c, cause))
        return p.payload

    # -- PFCP messages --------------------------------------------------------

    def establishment(self, s, far_for_dl=2, with_fseid=True, second_qfi=None,
                      pdi_extra=(), qer_extra=(), urr=None, bar=None, dnn="internet"):
        """A PDU session as an SMF sets it up: uplink PDR 1 (F-TEID CHOOSE,
        QFI, outer header removal), downlink PDR 2 (UE address), FAR 1 to
        the core, FAR 2 to the gNB with outer header creation, QER 1 with
        the QFI, URR 1 measuring volume (or with the IEs `urr`). `pdi_extra`
        and `qer_extra` add IEs to PDR 1's PDI and to QER 1. `bar`:
        (Downlink Data Notification Delay in 50 ms units, Suggested
        Buffering Packets Count) of BAR 1, which FAR 2 names. `dnn`: the
        Network Instance of every PDR and FAR."""
        if urr is None:
            urr = [IE_MeasurementMethod(VOLUM=1), IE_ReportingTriggers()]
        body = [IE_NodeId(id_type="IPv4", ipv4=self.smf)]
        if with_fseid:
            body.append(IE_FSEID(v4=1, seid=s.cp_seid, ipv4=self.smf))
        def uplink_pdr(pdr, qfi):
            # With a second flow both PDRs ask for one F-TEID (CHOOSE ID 1),
            # as an SMF sets up QoS flows of one PDU session.
            fteid = IE_FTEID(CH=1, CHID=1, V4=1, choose_id=1) if second_qfi else IE_FTEID(CH=1, V4=1)
            return IE_CreatePDR(IE_list=[
                IE_PDR_Id(id=pdr),
                IE_Precedence(precedence=200),
                IE_PDI(IE_list=[
                    IE_SourceInterface(interface="Access"),
                    fteid,
                    IE_NetworkInstance(instance=dnn),
                    IE_QFI(QFI=qfi),
                ] + list(pdi_extra)),
                IE_OuterHeaderRemoval(header="GTP-U/UDP/IPv4"),
                IE_FAR_Id(id=1),
                IE_URR_Id(id=1),
                IE_QER_Id(id=1),
            ])
        body.append(uplink_pdr(1, QFI))
        if second_qfi:
            body.append(uplink_pdr(3, second_qfi))
        body += [
            IE_CreatePDR(IE_list=[
                IE_PDR_Id(id=2),
                IE_Precedence(precedence=200),
                IE_PDI(IE_list=[
                    IE_SourceInterface(interface="Core"),
                    IE_NetworkInstance(instance=dnn),
                    IE_UE_IP_Address(SD=1, V4=1, ipv4=s.ue),
                ]),
                IE_FAR_Id(id=far_for_dl),
                IE_URR_Id(id=1),
                IE_QER_Id(id=1),
            ]),
            IE_CreateFAR(IE_list=[
                IE_FAR_Id(id=1),
                IE_ApplyAction(FORW=1),
                IE_ForwardingParameters(IE_list=[
                    IE_DestinationInterface(interface="Core"),
                    IE_NetworkInstance(instance=dnn),
                ]),
            ]),
            IE_CreateFAR(IE_list=[
                IE_FAR_Id(id=2),
                IE_ApplyAction(FORW=1),
                IE_ForwardingParameters(IE_list=[
                    IE_DestinationInterface(interface="Access"),
                    IE_NetworkInstance(instance=dnn),
                    IE_OuterHeaderCreation(GTPUUDPIPV4=1, TEID=s.dl_teid, ipv4=s.gnb),
                ]),
            ] + ([IE_BAR_Id(id=1)] if bar else [])),
            IE_CreateURR(IE_list=[IE_URR_Id(id=1)] + list(urr)),
            IE_CreateQER(IE_list=[
                IE_QER_Id(id=1),
                IE_GateStatus(ul="OPEN", dl="OPEN"),
                IE_QFI(QFI=QFI),
            ] + list(qer_extra)),
            IE_PDNType(pdn_type="IPv4"),
        ]
        if bar:
            body.append(IE_Create_BAR(IE_list=[
                IE_BAR_Id(id=1),
                IE_DownlinkDataNotificationDelay(delay=bar[0]),
                IE_SuggestedBufferingPacketsCount(count=bar[1]),
            ]))
        return self.header(0) / PFCPSessionEstablishmentRequest(IE_list=body)

    def accept_establishment(self, s, got, shared=False):
        where = "Session Establishment Response for UE %s" % s.ue
        body = self.expect_response(got, ESTABLISHMENT_RESPONSE, s.cp_seid, ACCEPTED, where)
        nid = fqdn(one_ie(body, IE_NodeId, where))
        check(nid == self.cfg["node_id"], "%s: Node ID %s, want %s" % (where, nid, self.cfg["node_id"]))
        f = one_ie(body, IE_FSEID, where)
        check(f.v4 == 1 and f.ipv4 == self.upf, "%s: UP F-SEID %r" % (where, f))
        created = ies(body, IE_CreatedPDR)
        want = shared if isinstance(shared, list) else [1, 3] if shared else [1]
        check(sorted(one_ie(c, IE_PDR_Id, where).id for c in created) == want,
              "%s: Created PDRs %r, want PDRs %r" % (where, created, want))
        teids = set()
        for c in created:
            t = one_ie(c, IE_FTEID, where)
            check(t.CH == 0 and t.V4 == 1 and t.V6 == 0 and t.ipv4 == self.upf,
                  "%s: F-TEID %r, want an IPv4 one on %s" % (where, t, self.upf))
            teids.add(t.TEID)
        check(len(teids) == 1, "%s: PDRs of one CHOOSE ID got TEIDs %r" % (where, teids))
        s.up_seid = f.seid
        s.ul_teid = teids.pop()

    def update_far2(self, s, action, gnb=None, teid=None, sndem=False):
        """Session Modification Request: FAR 2 (downlink) gets `action`,
        and a new gNB tunnel if given (with SNDEM: End Marker on the old)."""
        far = [IE_FAR_Id(id=2), IE_ApplyAction(**{a: 1 for a in action})]
        if gnb is not None:
            fp = [
                IE_DestinationInterface(interface="Access"),
                IE_OuterHeaderCreation(GTPUUDPIPV4=1, TEID=teid, ipv4=gnb),
            ]
            if sndem:
                fp.append(IE_PFCPSMReqFlags(SNDEM=1))
            far.append(IE_UpdateForwardingParameters(IE_list=fp))
        return self.header(s.up_seid) / PFCPSessionModificationRequest(IE_list=[IE_UpdateFAR(IE_list=far)])

    def query_urr(self, s):
        return self.header(s.up_seid) / PFCPSessionModificationRequest(
            IE_list=[IE_QueryURR(IE_list=[IE_URR_Id(id=1)])]
        )

    def check_usage(self, s, body, cls, trigger, seqn, where, at=None):
        rep = one_ie(body, cls, where)
        check(one_ie(rep, IE_URR_Id, where).id == 1, "%s: URR ID" % where)
        n = one_ie(rep, IE_UR_SEQN, where).number
        check(n == seqn, "%s: UR-SEQN %d, want %d" % (where, n, seqn))
        trig = one_ie(rep, IE_UsageReportTrigger, where)
        check(getattr(trig, trigger) == 1, "%s: trigger %r, want %s" % (where, trig, trigger))
        # The measurement period (TS 29.244 Tables 7.5.5.2-1, 7.5.7.2-1),
        # NTP seconds: it ends when the response came (`at`, else now), by
        # this host's clock, give or take.
        start = one_ie(rep, IE_StartTime, where).timestamp
        end = one_ie(rep, IE_EndTime, where).timestamp
        now = int(at or time.time()) + NTP_UNIX_OFFSET
        check(start <= end and abs(end - now) <= 5,
              "%s: Start Time %d, End Time %d, now %d" % (where, start, end, now))
        got = volume(one_ie(rep, IE_VolumeMeasurement, where))
        want = (s.ul[1] + s.dl[1], s.ul[1], s.dl[1], s.ul[0] + s.dl[0], s.ul[0], s.dl[0])
        check(got == want, "%s: volume (total, ul, dl bytes; total, ul, dl packets) %r, want %r"
              % (where, got, want))
        s.ul, s.dl = [0, 0], [0, 0]
        return got

    # -- N3 and N6 --------------------------------------------------------------

    def gpdu(self, s, n, size, qfi=QFI):
        """An uplink G-PDU of session `s` (UL PDU Session Container with the
        QFI) carrying a UE -> DN UDP datagram tagged (session, n), padded to
        an inner packet of `size` octets."""
        tag = b"ul %d %d " % (s.index, n)
        pad = size - 28 - len(tag)
        check(pad >= 0, "size %d too small" % size)
        inner = IP(src=s.ue, dst=self.dn, ttl=64) / UDP(sport=s.port, dport=self.dn_port) / Raw(tag + b"." * pad)
        return bytes(GTP_U_Header(teid=s.ul_teid, gtp_type=255)
                     / GTPPDUSessionContainer(type=1, QFI=qfi) / inner), len(inner), tag + b"." * pad

    def downlink_payload(self, s, n, size):
        tag = b"dl %d %d " % (s.index, n)
        return tag + b"," * (size - 28 - len(tag))

    def parse_downlink(self, data, where):
        """A G-PDU tep sent a gNB: checks the header and the DL PDU Session
        Container (QFI); returns (TEID, inner IP packet)."""
        h = GTPHeader(data)
        check(h.version == 1 and h.PT == 1, "%s: GTP version %d PT %d" % (where, h.version, h.PT))
        check(h.gtp_type == 255, "%s: GTP-U message type %d, want a G-PDU" % (where, h.gtp_type))
        check(h.length == len(data) - 8, "%s: GTP-U length %d of %d octets" % (where, h.length, len(data)))
        check(h.E == 1 and h.next_ex == 0x85, "%s: no PDU Session Container (E=%d next %r)" % (where, h.E, h.next_ex))
        psc = h[GTPPDUSessionContainer]
        check(psc.type == 0, "%s: container type %d, want 0 (DL)" % (where, psc.type))
        check(psc.QFI == QFI, "%s: QFI %d, want %d" % (where, psc.QFI, QFI))
        check(psc.NextExtHdr == 0, "%s: another extension 0x%x" % (where, psc.NextExtHdr))
        # The T-PDU starts where the extension chain's lengths say.
        at = 12 + data[12] * 4
        return h.teid, IP(data[at:])

    def drain(self, sock, wait):
        """Datagrams arriving on `sock` within `wait` s: [(bytes, source)]."""
        out = []
        end = time.monotonic() + wait
        while True:
            r, _, _ = select.select([sock], [], [], max(0, end - time.monotonic()))
            if not r:
                return out
            while True:
                try:
                    data, src = sock.recvfrom(65535)
                except BlockingIOError:
                    break
                if not self.echo_request(sock, data, src):
                    out.append((data, src))

    def echo_request(self, sock, data, src):
        """Whether `data` is tep's Echo Request to a gNB (TS 29.281 §7.2.1):
        counted, and answered to the port it came from unless the gNB is
        silenced, as a gNB's GTP-U stack does whatever else it is doing."""
        if sock not in self.gnb_socks or len(data) < 8 or data[1] != GTPU_ECHO_REQUEST:
            return False
        gnb = self.gnbs[self.gnb_socks.index(sock)]
        h = GTPHeader(data)
        check(src[0] == self.upf, "Echo Request at %s from %r" % (gnb, src))
        check(h.S == 1 and h.teid == 0, "Echo Request at %s: S=%d TEID %d" % (gnb, h.S, h.teid))
        check(src[1] != GTPU_PORT, "Echo Request at %s from port 2152, want tep's own" % gnb)
        self.echo_requests[gnb] = self.echo_requests.get(gnb, 0) + 1
        if gnb not in self.silent_gnbs:
            rsp = GTPHeader(gtp_type=2, S=1, seq=h.seq, teid=0) / GTPEchoResponse(
                IE_list=[IE_Recovery(restart_counter=0)])
            sock.sendto(bytes(rsp), src)
        return True

    def window(self, want, collect, most=WINDOW):
        """Keeps at most `most` datagrams in flight: the kernel forwards a
        burst from the DN into tep's TUN through a queue of 500 packets
        (the TUN's txqueuelen) that a slower tep build does not drain as
        fast as Python fills it. Losses still show: what never arrives
        keeps its place in `want` and the final check names it."""
        if len(want) < most:
            return
        end = time.monotonic() + 2
        while len(want) >= most // 4 and time.monotonic() < end:
            before = len(want)
            collect(0.05)
            if len(want) == before and time.monotonic() >= end:
                break

    def await_one(self, sock, wait=1.0, linger=0.15):
        """What arrives on `sock`: waits up to `wait` s for a first datagram,
        then `linger` s more for any that should not be there."""
        got = []
        end = time.monotonic() + wait
        while not got and time.monotonic() < end:
            got += self.drain(sock, min(0.05, max(0, end - time.monotonic())))
        return got + self.drain(sock, linger)

    def uplink(self, sess, gnb=None, sizes=(100,), wait=5.0, qfi=QFI):
        """One G-PDU per session and size from its gNB (or `gnb`); each
        inner datagram must reach the DN exactly once, from the UE address."""
        want = {}
        n = 0
        for s in sess:
            sock = self.gnb_socks[self.gnbs.index(gnb or s.gnb)]
            for size in sizes:
                b, inner_len, payload = self.gpdu(s, n, size, qfi)
                want[payload] = (s, inner_len)
                sock.sendto(b, (self.upf, GTPU_PORT))
                n += 1
                self.window(want, lambda w: self.collect_uplink(want, w))
        self.collect_uplink(want, wait)
        check(not want, "uplink: %d of %d datagrams did not reach the DN, e.g. %r"
              % (len(want), n, [k[:16] for k in list(want)[:5]]))
        # Late duplicates.
        extra = self.drain(self.dn_sock, 0.2)
        check(not extra, "uplink: %d datagrams more than sent, e.g. %r" % (len(extra), extra[:3]))
        return n

    def collect_uplink(self, want, wait):
        end = time.monotonic() + wait
        while True:
            for payload, (src, sport) in self.drain(self.dn_sock, 0 if not want else max(0, min(0.2, end - time.monotonic()))):
                got = want.pop(payload, None)
                check(got is not None, "uplink: unexpected or duplicate datagram from %s: %r" % (src, payload[:24]))
                s, inner_len = got
                check((src, sport) == (s.ue, s.port), "uplink: from %s:%d, want %s:%d" % (src, sport, s.ue, s.port))
                s.ul[0] += 1
                s.ul[1] += inner_len
            if not want or time.monotonic() >= end:
                return

    def send_downlink(self, s, n, size):
        payload = self.downlink_payload(s, n, size)
        self.dn_sock.sendto(payload, (s.ue, s.port))
        return payload

    def downlink(self, sess, sizes=(100,), wait=5.0, gnb=None, teid=None):
        """One UDP datagram per session and size from the DN to the UE; each
        must reach the session's gNB (or `gnb`) exactly once, a G-PDU with
        the session's TEID (or `teid`) and QFI carrying it."""
        want = {}
        n = 0
        for s in sess:
            for size in sizes:
                p = self.send_downlink(s, n, size)
                want[p] = (s, size)
                n += 1
                self.window(want, lambda w: self.collect_downlink(want, w, gnb, teid))
        self.collect_downlink(want, wait, gnb, teid)
        check(not want, "downlink: %d of %d datagrams did not reach a gNB, e.g. %r"
              % (len(want), n, [k[:16] for k in list(want)[:5]]))
        for i, sock in enumerate(self.gnb_socks):
            extra = self.drain(sock, 0.2 if i == 0 else 0)
            check(not extra, "downlink: %d datagrams more than sent at gNB %s, e.g. %r"
                  % (len(extra), self.gnbs[i], extra[:2]))
        return n

    def collect_downlink(self, want, wait, gnb=None, teid=None):
        end = time.monotonic() + wait
        while True:
            ready, _, _ = select.select(self.gnb_socks, [], [], max(0, min(0.2, end - time.monotonic())) if want else 0)
            for sock in ready:
                at = self.gnbs[self.gnb_socks.index(sock)]
                for data, src in self.drain(sock, 0):
                    # TS 29.281 §4.4.2.0: a G-PDU's source port is the
                    # sender's to choose (tep spreads flows over several).
                    check(src[0] == self.upf, "downlink: G-PDU from %r" % (src,))
                    t, ip = self.parse_downlink(data, "downlink at %s" % at)
                    payload = bytes(ip[UDP].payload) if UDP in ip else b""
                    got = want.pop(payload, None)
                    check(got is not None, "downlink: unexpected or duplicate G-PDU at %s: %r" % (at, payload[:24]))
                    s, size = got
                    check(at == (gnb or s.gnb), "downlink for %s at gNB %s, want %s" % (s.ue, at, gnb or s.gnb))
                    check(t == (teid or s.dl_teid), "downlink for %s: TEID 0x%x, want 0x%x" % (s.ue, t, teid or s.dl_teid))
                    check(ip.dst == s.ue and ip.src == self.dn and ip.len == size,
                          "downlink: inner %s -> %s length %d, want %s -> %s %d" % (ip.src, ip.dst, ip.len, self.dn, s.ue, size))
                    s.dl[0] += 1
                    s.dl[1] += size
            if not want or time.monotonic() >= end:
                return

    # -- Commands -------------------------------------------------------------

    def cmd_associate(self, c):
        """Association Setup, then a Heartbeat."""
        req = self.header() / PFCPAssociationSetupRequest(IE_list=[
            IE_NodeId(id_type="FQDN", id="smf.test"),
            IE_RecoveryTimeStamp(timestamp=self.recovery),
        ])
        body = self.expect_response(self.request(req), ASSOCIATION_SETUP_RESPONSE, None, ACCEPTED,
                                    "Association Setup Response")
        nid = fqdn(one_ie(body, IE_NodeId, "Association Setup Response"))
        check(nid == self.cfg["node_id"], "UP Node ID %s, want %s" % (nid, self.cfg["node_id"]))
        ts = one_ie(body, IE_RecoveryTimeStamp, "Association Setup Response").timestamp
        now = int(time.time()) + NTP_UNIX
        check(now - 600 <= ts <= now, "Recovery Time Stamp %d, now is %d" % (ts, now))
        self.tep_recovery = ts
        feat = one_ie(body, IE_UPFunctionFeatures, "Association Setup Response")
        check(feat.FTUP == 1, "UP Function Features without FTUP (tep chooses F-TEIDs): %r" % feat)
        hb = self.request(self.header() / PFCPHeartbeatRequest(IE_list=[IE_RecoveryTimeStamp(timestamp=self.recovery)]))
        data, p = hb
        check(p.message_type == HEARTBEAT_RESPONSE and p.S == 0, "Heartbeat Response %r" % p)
        hts = one_ie(p.payload, IE_RecoveryTimeStamp, "Heartbeat Response").timestamp
        check(hts == ts, "Heartbeat Response Recovery Time Stamp %d, Association said %d" % (hts, ts))
        return {"recovery_time_stamp": ts, "node_id": nid}

    def cmd_establish(self, c):
        """Sessions first..first+count on gNB 0, requests pipelined."""
        first, count = c.get("first", 0), c["count"]
        new = [Session(i, self.cfg, self.gnbs[0]) for i in range(first, first + count)]
        t0 = time.monotonic()
        msgs = []
        by_seq = {}
        for s in new:
            p = self.establishment(s)
            msgs.append((p.seq, bytes(p)))
            by_seq[p.seq] = s
        built = time.monotonic() - t0
        got = self.exchange(msgs)
        for seq, s in by_seq.items():
            self.accept_establishment(s, got[seq])
            self.sessions[s.index] = s
        teids = {s.ul_teid for s in self.sessions.values()}
        seids = {s.up_seid for s in self.sessions.values()}
        check(len(teids) == len(self.sessions), "%d uplink TEIDs for %d sessions" % (len(teids), len(self.sessions)))
        check(len(seids) == len(self.sessions), "%d UP SEIDs for %d sessions" % (len(seids), len(self.sessions)))
        return {"sessions": count, "build_s": round(built, 2), "total_s": round(time.monotonic() - t0, 2)}

    def pick(self, c):
        if "sessions" in c:
            return [self.sessions[i] for i in c["sessions"]]
        return [self.sessions[i] for i in sorted(self.sessions)][c.get("from", 0):c.get("to")]

    def cmd_uplink(self, c):
        sess = self.pick(c)
        sizes = c.get("sizes", [100])
        n = self.uplink(sess, gnb=c.get("gnb"), sizes=sizes)
        return {"packets": n, "bytes": sum(sizes) * len(sess)}

    def cmd_downlink(self, c):
        sess = self.pick(c)
        sizes = c.get("sizes", [100])
        n = self.downlink(sess, sizes=sizes)
        return {"packets": n, "bytes": sum(sizes) * len(sess)}

    def cmd_handover(self, c):
        """Downlink to gNB A, then Session Modification to gNB B with a new
        TEID and SNDEM: an End Marker with the old TEID reaches A (after the
        last G-PDU there), then downlink goes to B. Uplink from B with the
        same TEID of tep's reaches the DN."""
        s = self.sessions[c["session"]]
        old_gnb, new_gnb = s.gnb, self.gnbs[1 - self.gnbs.index(s.gnb)]
        old_teid, new_teid = s.dl_teid, s.dl_teid + 0x0080_0000
        self.downlink([s])
        req = self.update_far2(s, ["FORW"], gnb=new_gnb, teid=new_teid, sndem=True)
        self.expect_response(self.request(req), MODIFICATION_RESPONSE, s.cp_seid, ACCEPTED, "handover")
        old_sock = self.gnb_socks[self.gnbs.index(old_gnb)]
        got = self.await_one(old_sock)
        check(len(got) == 1, "%d datagrams at the old gNB after the handover, want 1 End Marker: %r" % (len(got), got))
        data, src = got[0]
        check(src[0] == self.upf, "End Marker from %r" % (src,))
        h = GTPHeader(data)
        check(h.version == 1 and h.PT == 1 and h.gtp_type == 254,
              "not an End Marker: version %d PT %d type %d" % (h.version, h.PT, h.gtp_type))
        check(h.teid == old_teid, "End Marker TEID 0x%x, want the old 0x%x" % (h.teid, old_teid))
        check(h.length == len(data) - 8, "End Marker length %d of %d octets" % (h.length, len(data)))
        s.gnb, s.dl_teid = new_gnb, new_teid
        self.downlink([s], sizes=[100, 300])
        self.uplink([s], gnb=new_gnb)
        return {"old_teid": old_teid, "new_teid": new_teid, "end_marker_octets": len(data)}

    def buffer_and_report(self, s, sent_count, answer_cause, await_resend=False, spoof=False):
        """FAR 2 of `s` to BUFF+NOCP, `sent_count` downlink datagrams (kept
        for later checks), and the one Session Report Request they cause
        (a Downlink Data Report naming PDR 2), answered with
        `answer_cause`. `spoof`: the stranger answers it first, Session
        context not found: tep must neither drop the session nor take the
        report as answered (it comes again after T1)."""
        req = self.update_far2(s, ["BUFF", "NOCP"])
        self.expect_response(self.request(req), MODIFICATION_RESPONSE, s.cp_seid, ACCEPTED, "FAR 2 to BUFF")
        sent = [self.send_downlink(s, k, 200 + k) for k in range(sent_count)]
        end = time.monotonic() + 5
        while not self.reports and time.monotonic() < end:
            self.pump(0.1)
        check(self.reports, "no Session Report Request within 5 s of %d buffered packets" % sent_count)
        # One report per buffering episode, not one per packet.
        self.pump(0.5)
        check(len(self.reports) == 1, "%d Session Report Requests, want 1" % len(self.reports))
        data, p = self.reports.pop()
        if spoof:
            fake = PFCP(version=1, S=1, seid=s.up_seid, seq=p.seq) / PFCPSessionReportResponse(
                IE_list=[IE_Cause(cause=NOT_FOUND)]
            )
            self.stranger.sendto(bytes(fake), (self.upf, PFCP_PORT))
            await_resend = True
        if await_resend:
            # Unanswered, the request comes again after T1 (3 s), the same
            # bytes.
            end = time.monotonic() + 6
            while not self.reports and time.monotonic() < end:
                self.pump(0.1)
            check(self.reports, "the unanswered Session Report Request was not resent within 6 s")
            again = self.reports.pop()[0]
            check(again == data, "the resent Session Report Request differs:\n%s\n%s" % (data.hex(), again.hex()))
        where = "Session Report Request"
        check(p.S == 1 and p.seid == s.cp_seid, "%s: SEID %r, want our CP SEID 0x%x" % (where, p.seid, s.cp_seid))
        rt = one_ie(p.payload, IE_ReportType, where)
        check(rt.DLDR == 1 and rt.USAR == 0, "%s: report type %r" % (where, rt))
        ddr = one_ie(p.payload, IE_DownlinkDataReport, where)
        pdr = one_ie(ddr, IE_PDR_Id, where).id
        check(pdr == 2, "%s: Downlink Data Report names PDR %d, want 2" % (where, pdr))
        rsp = PFCP(version=1, S=1, seid=s.up_seid, seq=p.seq) / PFCPSessionReportResponse(
            IE_list=[IE_Cause(cause=answer_cause)]
        )
        self.n4.sendto(bytes(rsp), (self.upf, PFCP_PORT))
        return sent, p.seq

    def cmd_buffer(self, c):
        """FAR 2 to BUFF+NOCP; N downlink datagrams are held and reported
        once (Downlink Data Report naming PDR 2); FAR 2 to FORW releases all
        N to the gNB, in order. `extra` more sent while N are held find the
        buffer full: none of them is released."""
        s = self.sessions[c["session"]]
        n = c["packets"]
        sent, seq = self.buffer_and_report(s, n + c.get("extra", 0), ACCEPTED, spoof=c.get("spoof", False))
        sent = sent[:n]
        for i, sock in enumerate(self.gnb_socks):
            early = self.drain(sock, 0)
            check(not early, "%d datagrams reached gNB %s while FAR 2 buffered" % (len(early), self.gnbs[i]))
        req = self.update_far2(s, ["FORW"])
        self.expect_response(self.request(req), MODIFICATION_RESPONSE, s.cp_seid, ACCEPTED, "FAR 2 to FORW")
        sock = self.gnb_socks[self.gnbs.index(s.gnb)]
        got = []
        end = time.monotonic() + 3
        while len(got) < n and time.monotonic() < end:
            got += self.drain(sock, 0.1)
        got += self.drain(sock, 0.3)
        payloads = []
        for data, src in got:
            t, ip = self.parse_downlink(data, "released packet")
            check(t == s.dl_teid, "released packet TEID 0x%x, want 0x%x" % (t, s.dl_teid))
            payloads.append(bytes(ip[UDP].payload))
        check(payloads == sent, "released %d packets %r, want the %d sent, in order"
              % (len(payloads), [x[:10] for x in payloads], n))
        for k in range(n):
            s.dl[0] += 1
            s.dl[1] += len(sent[k]) + 28
        self.pump(0.2)
        check(not self.reports, "another Session Report Request: %r" % self.reports)
        # The session forwards as before.
        self.downlink([s])
        return {"buffered": n, "report_seq": seq}

    def cmd_bar(self, c):
        """A new session whose FAR 2 names BAR 1 (Downlink Data
        Notification Delay `delay` x 50 ms, Suggested Buffering Packets
        Count `count`). FAR 2 to BUFF+NOCP; `count` + `extra` downlink
        datagrams: one Downlink Data Report naming PDR 2, `delay` after the
        first (measured); FAR 2 to FORW with DROBU: none of the held packets
        reaches the gNB; then the session forwards as before."""
        s = Session(c["index"], self.cfg, self.gnbs[0])
        self.accept_establishment(s, self.request(self.establishment(s, bar=(c["delay"], c["count"]))))
        self.sessions[s.index] = s
        req = self.update_far2(s, ["BUFF", "NOCP"])
        self.expect_response(self.request(req), MODIFICATION_RESPONSE, s.cp_seid, ACCEPTED, "FAR 2 to BUFF")
        t0 = time.monotonic()
        for k in range(c["count"] + c["extra"]):
            self.send_downlink(s, k, 100)
        end = t0 + 5
        while not self.reports and time.monotonic() < end:
            self.pump(0.01)
        after = time.monotonic() - t0
        check(self.reports, "no Session Report Request within 5 s of the first buffered packet")
        self.pump(0.3)
        check(len(self.reports) == 1, "%d Session Report Requests, want 1" % len(self.reports))
        data, p = self.reports.pop()
        where = "Session Report Request"
        check(p.S == 1 and p.seid == s.cp_seid, "%s: SEID %r" % (where, p.seid))
        ddr = one_ie(p.payload, IE_DownlinkDataReport, where)
        check(one_ie(ddr, IE_PDR_Id, where).id == 2, "%s: not PDR 2" % where)
        rsp = PFCP(version=1, S=1, seid=s.up_seid, seq=p.seq) / PFCPSessionReportResponse(
            IE_list=[IE_Cause(cause=ACCEPTED)]
        )
        self.n4.sendto(bytes(rsp), (self.upf, PFCP_PORT))
        sock = self.gnb_socks[self.gnbs.index(s.gnb)]
        check(not self.drain(sock, 0), "datagrams reached the gNB while FAR 2 buffered")
        req = self.header(s.up_seid) / PFCPSessionModificationRequest(IE_list=[
            IE_UpdateFAR(IE_list=[IE_FAR_Id(id=2), IE_ApplyAction(FORW=1)]),
            IE_PFCPSMReqFlags(DROBU=1),
        ])
        self.expect_response(self.request(req), MODIFICATION_RESPONSE, s.cp_seid, ACCEPTED, "FAR 2 to FORW, DROBU")
        late = self.drain(sock, 0.5)
        check(not late, "%d held packets reached the gNB after DROBU" % len(late))
        self.downlink([s])
        return {"report_after": after}

    def cmd_usage(self, c):
        """A new session: traffic, Query URR (its report counts that
        traffic's inner packets), more traffic, Session Deletion (its report
        counts the rest); then tep has forgotten its TEID (an Error
        Indication answers a G-PDU to it)."""
        s = Session(c["index"], self.cfg, self.gnbs[0])
        p = self.establishment(s)
        self.accept_establishment(s, self.request(p))
        self.sessions[s.index] = s
        self.uplink([s], sizes=[60, 200, 1000])
        self.downlink([s], sizes=[80, 1200])
        first = (list(s.ul), list(s.dl))
        body = self.expect_response(self.request(self.query_urr(s)), MODIFICATION_RESPONSE, s.cp_seid, ACCEPTED, "Query URR")
        q = self.check_usage(s, body, IE_UsageReport_SMR, "IMMER", 0, "Query URR")
        self.uplink([s], sizes=[500])
        self.downlink([s], sizes=[90, 90, 700])
        second = (list(s.ul), list(s.dl))
        req = self.header(s.up_seid) / PFCPSessionDeletionRequest()
        body = self.expect_response(self.request(req), DELETION_RESPONSE, s.cp_seid, ACCEPTED, "Session Deletion")
        d = self.check_usage(s, body, IE_UsageReport_SDR, "TERMR", 1, "Session Deletion")
        del self.sessions[s.index]
        # The TEID is gone: an Error Indication names it.
        self.forgotten(s)
        return {"query": q, "deletion": d, "first": first, "second": second}

    def forgotten(self, s):
        """tep no longer has session `s`: a G-PDU to its TEID gets an Error
        Indication naming it, and reaches no DN."""
        b, _, _ = self.gpdu(s, 0, 100)
        sock = self.gnb_socks[self.gnbs.index(s.gnb)]
        sock.sendto(b, (self.upf, GTPU_PORT))
        got = self.await_one(sock)
        check(len(got) == 1, "%s: %d answers to a G-PDU to a forgotten TEID, want 1 Error Indication" % (s.ue, len(got)))
        h = GTPHeader(got[0][0])
        check(h.gtp_type == 26, "%s: GTP-U type %d, want 26 (Error Indication)" % (s.ue, h.gtp_type))
        check(struct.pack("!BI", 16, s.ul_teid) in got[0][0], "Error Indication without TEID Data I 0x%x" % s.ul_teid)
        check(not self.drain(self.dn_sock, 0.2), "a G-PDU to a forgotten TEID reached the DN")

    def cmd_report_rejected(self, c):
        """A Session Report Response with Session context not found: the SMF
        has no such session, so tep drops its own (and its buffered
        packets: none reaches a gNB)."""
        s = self.sessions[c["session"]]
        self.buffer_and_report(s, 3, NOT_FOUND, await_resend=True)
        time.sleep(0.2)
        self.forgotten(s)
        for sock in self.gnb_socks:
            check(not self.drain(sock, 0.2), "buffered packets of a dropped session reached a gNB")
        del self.sessions[s.index]
        return {"dropped": s.index}

    def cmd_restart(self, c):
        """A Heartbeat Request with a new Recovery Time Stamp: the SMF
        restarted, and the sessions it had are gone (TS 29.244 §19A)."""
        self.recovery += 1
        hb = self.request(self.header() / PFCPHeartbeatRequest(IE_list=[IE_RecoveryTimeStamp(timestamp=self.recovery)]))
        check(hb[1].message_type == HEARTBEAT_RESPONSE, "no Heartbeat Response: %r" % hb[1])
        time.sleep(0.2)
        gone = [self.sessions[i] for i in sorted(self.sessions)]
        for s in gone[:: max(1, len(gone) // 5)]:
            self.forgotten(s)
        for s in gone:
            self.send_downlink(s, 0, 100)
        for sock in self.gnb_socks:
            check(not self.drain(sock, 0.5), "downlink reached a gNB after the SMF restarted")
        self.sessions.clear()
        return {"forgotten": len(gone)}

    def cmd_two_flows(self, c):
        """A session with two uplink QoS flows (PDRs 1 and 3, QFIs 9 and
        `qfi`) on one F-TEID tep chose once for CHOOSE ID 1: G-PDUs of
        either QFI reach the DN; both count in the session's URR."""
        s = Session(c["index"], self.cfg, self.gnbs[0])
        p = self.establishment(s, second_qfi=c["qfi"])
        self.accept_establishment(s, self.request(p), shared=True)
        self.sessions[s.index] = s
        self.uplink([s], sizes=[100, 200])
        self.uplink([s], sizes=[300], qfi=c["qfi"])
        self.downlink([s])
        body = self.expect_response(self.request(self.query_urr(s)), MODIFICATION_RESPONSE, s.cp_seid, ACCEPTED, "Query URR")
        v = self.check_usage(s, body, IE_UsageReport_SMR, "IMMER", 0, "Query URR")
        return {"teid": s.ul_teid, "usage": v}

    def qos_flows_establishment(self, s, voice_urr=False, voice_dscp=None, voice_gbr=None):
        """Session `s` with two QoS flows each way and a filter that drops,
        on one F-TEID (CHOOSE ID 1) and one UE address, URR 1 on all:
        - default: PDRs 1 (up, QFI 9) and 2 (down), precedence 255, SDF
          `permit out ip from any to assigned`, FARs 1 and 2, QER 1 (QFI 9);
        - voice: PDRs 3 (up, QFI 1) and 4 (down), precedence 10, SDF UDP
          to the UE's ports 5000-5010, FAR 1 and FAR 3 (the gNB, TEID
          `s.dl_teid + 0x10000`), QER 2 (QFI 1);
        - PDRs 5 (up, QFI 9) and 6 (down), precedence 5, SDF UDP to the
          UE's port 6666, FAR 4: drop.
        With `voice_urr`, URR 2 (volume) on the voice PDRs 3 and 4 too (a
        list: its IEs beside its ID and Measurement Method);
        `voice_dscp`: FAR 3's Transport Level Marking (that DSCP, mask
        0xFC); `voice_gbr`: QER 2's GBR (UL, DL kbit/s)."""
        body = [IE_NodeId(id_type="IPv4", ipv4=self.smf), IE_FSEID(v4=1, seid=s.cp_seid, ipv4=self.smf)]

        def pdr(pid, prec, uplink, flow, far, qer, qfi=None, urrs=(1,)):
            pdi = [IE_SourceInterface(interface="Access" if uplink else "Core")]
            if uplink:
                pdi.append(IE_FTEID(CH=1, CHID=1, V4=1, choose_id=1))
            pdi.append(IE_NetworkInstance(instance="internet"))
            if not uplink:
                pdi.append(IE_UE_IP_Address(SD=1, V4=1, ipv4=s.ue))
            pdi.append(IE_SDF_Filter(FD=1, flow_description=flow))
            if qfi is not None:
                pdi.append(IE_QFI(QFI=qfi))
            rule = [IE_PDR_Id(id=pid), IE_Precedence(precedence=prec), IE_PDI(IE_list=pdi)]
            if uplink:
                rule.append(IE_OuterHeaderRemoval(header="GTP-U/UDP/IPv4"))
            rule += [IE_FAR_Id(id=far)] + [IE_URR_Id(id=u) for u in urrs]
            if qer:
                rule.append(IE_QER_Id(id=qer))
            return IE_CreatePDR(IE_list=rule)

        default, voice, blocked = ("permit out ip from any to assigned",
                                   "permit out 17 from any to assigned 5000-5010",
                                   "permit out 17 from any to assigned 6666")
        voice_urrs = (1, 2) if voice_urr else (1,)
        body += [
            pdr(1, 255, True, default, 1, 1, QFI),
            pdr(2, 255, False, default, 2, 1),
            pdr(3, 10, True, voice, 1, 2, 1, urrs=voice_urrs),
            pdr(4, 10, False, voice, 3, 2, urrs=voice_urrs),
            pdr(5, 5, True, blocked, 4, 0, QFI),
            pdr(6, 5, False, blocked, 4, 0),
        ]
        core = IE_ForwardingParameters(IE_list=[IE_DestinationInterface(interface="Core")])
        def access(teid, dscp=None):
            fp = [
                IE_DestinationInterface(interface="Access"),
                IE_OuterHeaderCreation(GTPUUDPIPV4=1, TEID=teid, ipv4=s.gnb),
            ]
            if dscp is not None:
                # scapy names the octets "tos" and "traffic_class": they are
                # the ToS/Traffic Class value and its mask (TS 29.244 §8.2.12).
                fp.append(IE_TransportLevelMarking(tos=dscp << 2, traffic_class=0xFC))
            return IE_ForwardingParameters(IE_list=fp)
        voice_qer = [IE_QER_Id(id=2), IE_GateStatus(ul="OPEN", dl="OPEN"), IE_QFI(QFI=1)]
        if voice_gbr is not None:
            voice_qer.append(IE_GBR(ul=voice_gbr[0], dl=voice_gbr[1]))
        body += [
            IE_CreateFAR(IE_list=[IE_FAR_Id(id=1), IE_ApplyAction(FORW=1), core]),
            IE_CreateFAR(IE_list=[IE_FAR_Id(id=2), IE_ApplyAction(FORW=1), access(s.dl_teid)]),
            IE_CreateFAR(IE_list=[IE_FAR_Id(id=3), IE_ApplyAction(FORW=1),
                                  access(s.dl_teid + 0x10000, voice_dscp)]),
            IE_CreateFAR(IE_list=[IE_FAR_Id(id=4), IE_ApplyAction(DROP=1)]),
            IE_CreateURR(IE_list=[IE_URR_Id(id=1), IE_MeasurementMethod(VOLUM=1), IE_ReportingTriggers()]),
            IE_CreateQER(IE_list=[IE_QER_Id(id=1), IE_GateStatus(ul="OPEN", dl="OPEN"), IE_QFI(QFI=QFI)]),
            IE_CreateQER(IE_list=voice_qer),
            IE_PDNType(pdn_type="IPv4"),
        ]
        if voice_urr:
            more = voice_urr if isinstance(voice_urr, list) else [IE_ReportingTriggers()]
            body.append(IE_CreateURR(IE_list=[IE_URR_Id(id=2), IE_MeasurementMethod(VOLUM=1)] + more))
        return self.header(0) / PFCPSessionEstablishmentRequest(IE_list=body)

    def cmd_qos_flows(self, c):
        """Session `index` as `qos_flows_establishment` sets it up. Downlink
        to the UE's voice port leaves with QFI 1 and FAR 3's TEID, to its
        other port with QFI 9 and FAR 2's, to port 6666 not at all; uplink
        with QFI 1 from the voice port and with QFI 9 from the other port
        reach the DN, from port 6666 (QFI 9) and QFI 1 from a port no
        voice filter takes do not. Returns what arrived."""
        s = Session(c["index"], self.cfg, self.gnbs[0])
        self.accept_establishment(s, self.request(self.qos_flows_establishment(s)), shared=[1, 3, 5])
        self.sessions[s.index] = s
        sock = self.gnb_socks[self.gnbs.index(s.gnb)]
        for port in (5005, s.port, 6666):
            self.dn_sock.sendto(b"dl to %d" % port, (s.ue, port))
        got = {}
        for data, _ in self.drain(sock, 1.0):
            h = GTPHeader(data)
            check(h.E == 1 and GTPPDUSessionContainer in h, "qos_flows: a G-PDU without a container")
            at = 12 + data[12] * 4
            ip = IP(data[at:])
            got[ip[UDP].dport] = (h.teid, h[GTPPDUSessionContainer].QFI)
            s.dl[0] += 1
            s.dl[1] += ip.len
        want = {5005: (s.dl_teid + 0x10000, 1), s.port: (s.dl_teid, QFI)}
        check(got == want, "qos_flows downlink: (TEID, QFI) by port %r, want %r" % (got, want))
        sent = [(1, 5005), (QFI, s.port), (QFI, 6666), (1, s.port)]
        for qfi, sport in sent:
            inner = IP(src=s.ue, dst=self.dn) / UDP(sport=sport, dport=self.dn_port) / Raw(b"ul qfi %d" % qfi)
            sock.sendto(bytes(GTP_U_Header(teid=s.ul_teid, gtp_type=255)
                              / GTPPDUSessionContainer(type=1, QFI=qfi) / inner), (self.upf, GTPU_PORT))
        arrived = sorted((src[1], payload) for payload, src in self.drain(self.dn_sock, 1.0))
        want = sorted([(5005, b"ul qfi 1"), (s.port, b"ul qfi %d" % QFI)])
        check(arrived == want, "qos_flows uplink: %r, want %r" % (arrived, want))
        for _ in arrived:
            s.ul[0] += 1
            s.ul[1] += 28 + 8
        return {"downlink": len(got), "uplink": len(arrived)}

    def recv_tos(self, sock, wait):
        """G-PDUs arriving on gNB socket `sock` within `wait` s, with the
        outer IPv4 ToS each came with: [(bytes, tos)]."""
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
        out = []
        end = time.monotonic() + wait
        try:
            while select.select([sock], [], [], max(0, end - time.monotonic()))[0]:
                data, anc, _, src = sock.recvmsg(65535, socket.CMSG_SPACE(4))
                if self.echo_request(sock, data, src):
                    continue
                tos = [d[0] for level, kind, d in anc if level == socket.IPPROTO_IP and kind == socket.IP_TOS]
                check(len(tos) == 1, "no ToS with a G-PDU: %r" % anc)
                out.append((data, tos[0]))
        finally:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 0)
        return out

    def cmd_qos_marks(self, c):
        """The qos_flows session with URR 2 on the voice PDRs only, FAR 3
        (voice, downlink) marking DSCP `dscp` and a GBR on the voice QER.
        Downlink to the voice port reaches the gNB with that DSCP in the
        outer header, to another port with DSCP 0 (the inner packet's);
        then one uplink packet each way; at deletion, URR 1's report counts
        every packet, URR 2's only the voice ones."""
        s = Session(c["index"], self.cfg, self.gnbs[0])
        p = self.qos_flows_establishment(s, voice_urr=True, voice_dscp=c["dscp"], voice_gbr=(64, 128))
        self.accept_establishment(s, self.request(p), shared=[1, 3, 5])
        sock = self.gnb_socks[self.gnbs.index(s.gnb)]
        for port, size in ((5005, 300), (s.port, 700)):
            self.dn_sock.sendto(b"d" * size, (s.ue, port))
        got, voice, total = {}, [[0, 0], [0, 0]], [[0, 0], [0, 0]]
        for data, tos in self.recv_tos(sock, 1.0):
            ip = IP(data[12 + data[12] * 4:])
            got[ip[UDP].dport] = tos >> 2
            for t in [total] + ([voice] if ip[UDP].dport == 5005 else []):
                t[1][0] += 1
                t[1][1] += ip.len
        want = {5005: c["dscp"], s.port: 0}
        check(got == want, "qos_marks: outer DSCP by port %r, want %r" % (got, want))
        for qfi, sport in ((1, 5005), (QFI, s.port)):
            inner = IP(src=s.ue, dst=self.dn) / UDP(sport=sport, dport=self.dn_port) / Raw(b"u" * (50 + sport % 7))
            sock.sendto(bytes(GTP_U_Header(teid=s.ul_teid, gtp_type=255)
                              / GTPPDUSessionContainer(type=1, QFI=qfi) / inner), (self.upf, GTPU_PORT))
            for t in [total] + ([voice] if sport == 5005 else []):
                t[0][0] += 1
                t[0][1] += len(inner)
        arrived = self.drain(self.dn_sock, 1.0)
        check(len(arrived) == 2, "qos_marks uplink: %d of 2 arrived" % len(arrived))
        where = "qos_marks: Session Deletion"
        body = self.expect_response(self.request(self.header(s.up_seid) / PFCPSessionDeletionRequest()),
                                    DELETION_RESPONSE, s.cp_seid, ACCEPTED, where)
        reports = {one_ie(r, IE_URR_Id, where).id: volume(one_ie(r, IE_VolumeMeasurement, where))
                   for r in ies(body, IE_UsageReport_SDR)}
        def vol(t):
            return (t[0][1] + t[1][1], t[0][1], t[1][1], t[0][0] + t[1][0], t[0][0], t[1][0])
        check(reports == {1: vol(total), 2: vol(voice)},
              "qos_marks: Usage Reports %r, want %r" % (reports, {1: vol(total), 2: vol(voice)}))
        return {"dscp": got, "urr1": reports[1], "urr2": reports[2]}

    def cmd_release(self, c):
        """Association Release: tep drops the SMF's sessions, and takes no
        new one without an association (Cause 72)."""
        req = self.header() / PFCPAssociationReleaseRequest(IE_list=[IE_NodeId(id_type="FQDN", id="smf.test")])
        body = self.expect_response(self.request(req), ASSOCIATION_RELEASE_RESPONSE, None, ACCEPTED,
                                    "Association Release Response")
        check(fqdn(one_ie(body, IE_NodeId, "Association Release Response")) == self.cfg["node_id"],
              "Association Release Response: Node ID")
        gone = [self.sessions[i] for i in sorted(self.sessions)]
        for s in gone:
            self.forgotten(s)
        self.sessions.clear()
        s = Session(c["index"], self.cfg, self.gnbs[0])
        self.expect_response(self.request(self.establishment(s)), ESTABLISHMENT_RESPONSE, s.cp_seid,
                             NO_ASSOCIATION, "establishment without an association")
        return {"forgotten": len(gone)}

    def cmd_qfi_mismatch(self, c):
        """G-PDUs to a live session's TEID whose QFI its uplink PDR does not
        match (another QFI, or no PDU Session Container): no PDR matches,
        so they go nowhere. Returns the GTP-U types of what tep answered:
        the TEID is known, so there should be no Error Indication (TS
        29.281 §7.3.1 sends one only where no PDU session exists; the gNB
        releases the session on one); upf.rs says whether that is checked."""
        s = self.sessions[c["session"]]
        sock = self.gnb_socks[self.gnbs.index(s.gnb)]
        inner = IP(src=s.ue, dst=self.dn) / UDP(sport=s.port, dport=self.dn_port) / Raw(b"wrong qfi")
        for b in (
            bytes(GTP_U_Header(teid=s.ul_teid, gtp_type=255) / GTPPDUSessionContainer(type=1, QFI=QFI + 1) / inner),
            bytes(GTP_U_Header(teid=s.ul_teid, gtp_type=255) / inner),
        ):
            sock.sendto(b, (self.upf, GTPU_PORT))
        answers = self.drain(sock, 0.5)
        got = self.drain(self.dn_sock, 0)
        check(not got, "a G-PDU with another QFI reached the DN: %r" % got)
        return {"sent": 2, "answers": [GTPHeader(a[0]).gtp_type for a in answers]}

    def cmd_spoof_ue(self, c):
        """G-PDUs from a live session's gNB with its TEID and QFI whose
        inner source is not its UE's: another session's UE, an unassigned
        pool address, one outside the pool. None may reach the DN (IP
        address spoofing prevention, TS 23.501 §5.8.2.x); a later Usage
        Report must not count them (smf.py counts only what arrived)."""
        s = self.sessions[c["session"]]
        sock = self.gnb_socks[self.gnbs.index(s.gnb)]
        others = [o.ue for o in self.sessions.values() if o.ue != s.ue][:1]
        sources = others + ["10.45.250.1", "198.51.100.9"]
        for src in sources:
            inner = IP(src=src, dst=self.dn) / UDP(sport=s.port, dport=self.dn_port) / Raw(b"spoofed")
            sock.sendto(bytes(GTP_U_Header(teid=s.ul_teid, gtp_type=255)
                              / GTPPDUSessionContainer(type=1, QFI=QFI) / inner), (self.upf, GTPU_PORT))
        got = self.drain(self.dn_sock, 0.5)
        check(not got, "a G-PDU with a spoofed inner source reached the DN: %r" % got)
        return {"sent": len(sources)}

    def cmd_bad_input(self, c):
        """Malformed and wrong requests get the Cause TS 29.244 §7.6 asks
        for; nothing they carry is applied."""
        out = {}
        s = self.sessions[c["session"]]
        # A truncated IE: Query URR whose length runs past the message (the
        # header's length agrees with the datagram).
        q = bytes(self.query_urr(s))
        cut = bytearray(q[:-2])
        struct.pack_into("!H", cut, 2, len(cut) - 4)
        seq = PFCP(bytes(cut)).seq
        got = self.exchange([(seq, bytes(cut))])[seq]
        body = self.expect_response(got, MODIFICATION_RESPONSE, s.cp_seid, INVALID_LENGTH, "truncated IE")
        off = one_ie(body, IE_OffendingIE, "truncated IE").type
        check(off == 77, "truncated IE: Offending IE %d, want 77 (Query URR)" % off)
        check(not ies(body, IE_UsageReport_SMR), "truncated IE: a usage report came back")
        out["truncated"] = {"cause": INVALID_LENGTH, "offending": off}
        # An unknown SEID: Session context not found, SEID 0 in the answer.
        ghost = Session(0, self.cfg, self.gnbs[0])
        ghost.up_seid = 0x0fed_cba9_8765_4321
        got = self.request(self.update_far2(ghost, ["DROP"]))
        self.expect_response(got, MODIFICATION_RESPONSE, 0, NOT_FOUND, "unknown SEID")
        out["unknown_seid"] = {"cause": NOT_FOUND}
        # A Create PDR naming no FAR of the request.
        bad = Session(c["spare"], self.cfg, self.gnbs[0])
        got = self.request(self.establishment(bad, far_for_dl=99))
        body = self.expect_response(got, ESTABLISHMENT_RESPONSE, bad.cp_seid, RULE_FAILURE, "PDR naming FAR 99")
        fr = one_ie(body, IE_FailedRuleId, "PDR naming FAR 99")
        check(fr.type == 0 and fr.pdr_id == 2, "Failed Rule ID %r, want PDR 2" % fr)
        check(not ies(body, IE_FSEID) and not ies(body, IE_CreatedPDR), "a rejected establishment created something")
        out["missing_far"] = {"cause": RULE_FAILURE, "failed_pdr": fr.pdr_id}
        # No CP F-SEID (mandatory): Mandatory IE missing, Offending IE 57.
        got = self.request(self.establishment(bad, with_fseid=False))
        body = self.expect_response(got, ESTABLISHMENT_RESPONSE, 0, IE_MISSING, "no F-SEID")
        off = one_ie(body, IE_OffendingIE, "no F-SEID").type
        check(off == 57, "no F-SEID: Offending IE %d, want 57" % off)
        out["missing_ie"] = {"cause": IE_MISSING, "offending": off}
        # The UE of the rejected establishments has no session: downlink to
        # it reaches no gNB.
        self.send_downlink(bad, 0, 100)
        for sock in self.gnb_socks:
            check(not self.drain(sock, 0.3), "downlink reached a gNB for a UE whose establishment failed")
        # A retransmitted establishment: the same response, byte for byte,
        # and one session.
        dup = Session(c["spare"] + 1, self.cfg, self.gnbs[0])
        p = self.establishment(dup)
        b = bytes(p)
        first = self.exchange([(p.seq, b)])[p.seq]
        again = self.exchange([(p.seq, b)])[p.seq]
        check(first[0] == again[0], "a retransmitted establishment got different bytes:\n%s\n%s"
              % (first[0].hex(), again[0].hex()))
        self.accept_establishment(dup, first)
        self.sessions[dup.index] = dup
        # A retransmitted handover: the same response, one End Marker.
        new_teid = dup.dl_teid + 0x0080_0000
        p = self.update_far2(dup, ["FORW"], gnb=self.gnbs[1], teid=new_teid, sndem=True)
        b = bytes(p)
        r1 = self.exchange([(p.seq, b)])[p.seq]
        r2 = self.exchange([(p.seq, b)])[p.seq]
        check(r1[0] == r2[0], "a retransmitted modification got different bytes")
        self.expect_response(r1, MODIFICATION_RESPONSE, dup.cp_seid, ACCEPTED, "retransmitted handover")
        ems = self.await_one(self.gnb_socks[0])
        check(len(ems) == 1 and GTPHeader(ems[0][0]).gtp_type == 254,
              "a retransmitted SNDEM modification: %d datagrams at the old gNB, want 1 End Marker" % len(ems))
        dup.gnb, dup.dl_teid = self.gnbs[1], new_teid
        self.uplink([dup])
        self.downlink([dup])
        out["duplicates"] = {"establishment_octets": len(first[0]), "end_markers": len(ems)}
        # Heartbeats still answered.
        hb = self.request(self.header() / PFCPHeartbeatRequest(IE_list=[IE_RecoveryTimeStamp(timestamp=self.recovery)]))
        check(hb[1].message_type == HEARTBEAT_RESPONSE, "no Heartbeat Response after the bad input")
        return out

    def expect_rule_failure(self, got, mtype, s, where, rule, offending):
        """A refusal of what tep does not enforce: Rule creation/modification
        Failure, the Failed Rule ID (type, id) and the Offending IE."""
        body = self.expect_response(got, mtype, s.cp_seid, RULE_FAILURE, where)
        fr = one_ie(body, IE_FailedRuleId, where)
        rid = {0: fr.pdr_id, 1: fr.far_id, 2: fr.qer_id, 3: fr.urr_id}.get(fr.type)
        check((fr.type, rid) == rule, "%s: Failed Rule ID %r, want type %d id %d" % (where, fr, rule[0], rule[1]))
        off = one_ie(body, IE_OffendingIE, where).type
        check(off == offending, "%s: Offending IE %d, want %d" % (where, off, offending))
        check(not ies(body, IE_FSEID) and not ies(body, IE_CreatedPDR), "%s: a refused request created something" % where)
        return {"cause": RULE_FAILURE, "rule_type": fr.type, "rule_id": rid, "offending": off}

    def cmd_unsupported(self, c):
        """What tep does not enforce is refused, never accepted and
        ignored: an SDF Filter outside the Flow Description subset tep
        applies (direction `in`) in PDR 1's PDI, a QER Correlation ID in
        QER 1, each in an establishment; an Update QER closing session
        `session`'s gates with a QER Correlation ID, in a modification:
        refused whole, so the session keeps forwarding (the caller sends
        traffic after)."""
        out = {}
        bad = Session(c["spare"], self.cfg, self.gnbs[0])
        sdf = IE_SDF_Filter(FD=1, flow_description="permit in 17 from any to assigned 9000")
        got = self.request(self.establishment(bad, pdi_extra=[sdf]))
        out["sdf_filter"] = self.expect_rule_failure(got, ESTABLISHMENT_RESPONSE, bad, "SDF Filter", (0, 1), 23)
        got = self.request(self.establishment(bad, qer_extra=[IE_QERCorrelationId(id=7)]))
        out["qer_correlation"] = self.expect_rule_failure(got, ESTABLISHMENT_RESPONSE, bad,
                                                          "QER Correlation ID", (2, 1), 28)
        s = self.sessions[c["session"]]
        qer = IE_UpdateQER(IE_list=[
            IE_QER_Id(id=1),
            IE_GateStatus(ul="CLOSED", dl="CLOSED"),
            IE_QERCorrelationId(id=7),
        ])
        got = self.request(self.header(s.up_seid) / PFCPSessionModificationRequest(IE_list=[qer]))
        out["qer_correlation_modification"] = self.expect_rule_failure(
            got, MODIFICATION_RESPONSE, s, "Update QER with a QER Correlation ID", (2, 1), 28)
        return out

    def cmd_mbr_session(self, c):
        """Session `session` for a gNB that is not smf.py's (`gnb`: another
        GTP-U endpoint, a second tep), with an MBR of `kbps` kbit/s each
        way; what that endpoint needs: the TEIDs and the UE's address."""
        s = Session(c["session"], self.cfg, c["gnb"])
        rate = IE_MBR(ul=c["kbps"], dl=c["kbps"])
        self.accept_establishment(s, self.request(self.establishment(s, qer_extra=[rate])))
        self.sessions[s.index] = s
        return {"ul_teid": s.ul_teid, "dl_teid": s.dl_teid, "ue": s.ue, "qfi": QFI}

    def cmd_mbr(self, c):
        """Session `session` established with an MBR of `kbps` kbit/s each
        way in its QER (the session AMBR, on both PDRs); then `count`
        datagrams of `size` octets each way as fast as this loop sends
        them. Returns how many arrived each way (at the DN; at the gNB,
        with the session's TEID)."""
        s = Session(c["session"], self.cfg, self.gnbs[0])
        rate = IE_MBR(ul=c["kbps"], dl=c["kbps"])
        self.accept_establishment(s, self.request(self.establishment(s, qer_extra=[rate])))
        self.sessions[s.index] = s
        sock = self.gnb_socks[self.gnbs.index(s.gnb)]
        n, size = c["count"], c["size"]
        # Built first: scapy takes longer to build one than the rate to
        # pass it.
        ups = [self.gpdu(s, k, size)[0] for k in range(n)]
        for b in ups:
            sock.sendto(b, (self.upf, GTPU_PORT))
        ul = len(self.drain(self.dn_sock, 0.5))
        for k in range(n):
            self.send_downlink(s, k, size)
        dl = 0
        for data, _ in self.drain(sock, 0.5):
            teid, _ = self.parse_downlink(data, "MBR downlink")
            dl += teid == s.dl_teid
        return {"sent": n, "ul_received": ul, "dl_received": dl}

    def from_other(self, sock, pkt, where, wait=1.0):
        """Sends `pkt` from another host's socket; its answers within
        `wait` s (after the first, 0.15 s more for any extra)."""
        sock.sendto(bytes(pkt), (self.upf, PFCP_PORT))
        got = self.await_one(sock, wait=wait)
        for _, src in got:
            check(src == (self.upf, PFCP_PORT), "%s: answered from %r" % (where, src))
        return [(d, PFCP(d)) for d, _ in got]

    def cmd_stranger(self, c):
        """Another host on N4, heard by tep (in its peers) but owning none
        of the SMF's sessions, tries to re-point session `session`'s
        downlink FAR at itself, to delete it, to take the SMF's association
        over (its Node ID, a new Recovery Time Stamp) and to claim a
        restart by Heartbeat: Session context not found (SEID 0, as for an
        unknown session), twice; Request rejected; a Heartbeat Response
        that changes nothing. A host outside the peers gets no answer at
        all. The session forwards as before, and the SMF's next
        modification is accepted."""
        s = self.sessions[c["session"]]
        other = c.get("stranger_addr", self.cfg["stranger"])
        hijack = self.update_far2(s, ["FORW"], gnb=other, teid=0x666)
        got = self.from_other(self.stranger, hijack, "hijack")
        check(len(got) == 1, "hijack: %d answers, want 1" % len(got))
        self.expect_response(got[0], MODIFICATION_RESPONSE, 0, NOT_FOUND, "the stranger's modification")
        delete = self.header(s.up_seid) / PFCPSessionDeletionRequest()
        got = self.from_other(self.stranger, delete, "deletion")
        check(len(got) == 1, "deletion: %d answers, want 1" % len(got))
        self.expect_response(got[0], DELETION_RESPONSE, 0, NOT_FOUND, "the stranger's deletion")
        takeover = self.header() / PFCPAssociationSetupRequest(IE_list=[
            IE_NodeId(id_type="FQDN", id="smf.test"),
            IE_RecoveryTimeStamp(timestamp=self.recovery + 1000),
        ])
        got = self.from_other(self.stranger, takeover, "takeover")
        check(len(got) == 1, "takeover: %d answers, want 1" % len(got))
        self.expect_response(got[0], ASSOCIATION_SETUP_RESPONSE, None, REJECTED, "the stranger's Association Setup")
        restart = self.header() / PFCPHeartbeatRequest(IE_list=[IE_RecoveryTimeStamp(timestamp=self.recovery + 1000)])
        got = self.from_other(self.stranger, restart, "heartbeat")
        check(len(got) == 1 and got[0][1].message_type == HEARTBEAT_RESPONSE, "the stranger's Heartbeat: %r" % got)
        unheard = 0
        if self.outsider is not None:
            for pkt in (self.header() / PFCPHeartbeatRequest(IE_list=[IE_RecoveryTimeStamp(timestamp=1)]),
                        self.header() / PFCPAssociationSetupRequest(IE_list=[
                            IE_NodeId(id_type="FQDN", id="outsider.test"),
                            IE_RecoveryTimeStamp(timestamp=1)])):
                got = self.from_other(self.outsider, pkt, "outsider", wait=0.5)
                check(not got, "a host outside tep's peers was answered: %r" % got)
                unheard += 1
        # Nothing moved: downlink still reaches the SMF's gNB with its TEID.
        self.uplink([s])
        self.downlink([s])
        req = self.update_far2(s, ["FORW"])
        self.expect_response(self.request(req), MODIFICATION_RESPONSE, s.cp_seid, ACCEPTED, "the SMF's next modification")
        return {"refused": 3, "unheard": unheard}

    def cmd_flood(self, c):
        """A handover with SNDEM (one End Marker); then the stranger floods
        tep with `count` Heartbeat Requests, each its own sequence number
        (each cached); then the SMF retransmits the handover: the same
        response bytes from tep's cache, and no second End Marker."""
        s = self.sessions[c["session"]]
        old_gnb, new_gnb = s.gnb, self.gnbs[1 - self.gnbs.index(s.gnb)]
        new_teid = s.dl_teid + 0x0080_0000
        p = self.update_far2(s, ["FORW"], gnb=new_gnb, teid=new_teid, sndem=True)
        b = bytes(p)
        r1 = self.exchange([(p.seq, b)])[p.seq]
        self.expect_response(r1, MODIFICATION_RESPONSE, s.cp_seid, ACCEPTED, "handover before the flood")
        old_sock = self.gnb_socks[self.gnbs.index(old_gnb)]
        ems = self.await_one(old_sock)
        check(len(ems) == 1, "handover: %d datagrams at the old gNB, want 1 End Marker" % len(ems))
        answered = 0
        hb = bytes(PFCP(version=1, S=0, seq=0) / PFCPHeartbeatRequest(
            IE_list=[IE_RecoveryTimeStamp(timestamp=self.recovery)]))
        for base in range(0, c["count"], 200):
            n = min(200, c["count"] - base)
            for k in range(n):
                m = bytearray(hb)
                m[4:7] = (0x700000 + base + k).to_bytes(3, "big")
                self.stranger.sendto(bytes(m), (self.upf, PFCP_PORT))
            got, end = 0, time.monotonic() + 2
            while got < n and time.monotonic() < end:
                got += len(self.drain(self.stranger, 0.05))
            answered += got
        self.pump(0.1)
        r2 = self.exchange([(p.seq, b)])[p.seq]
        check(r1[0] == r2[0], "the retransmitted handover after the flood got different bytes:\n%s\n%s"
              % (r1[0].hex(), r2[0].hex()))
        again = self.await_one(old_sock, wait=0.5)
        check(not again, "the retransmitted handover was applied again: %d datagrams at the old gNB" % len(again))
        s.gnb, s.dl_teid = new_gnb, new_teid
        self.downlink([s])
        return {"flood": c["count"], "answered": answered}

    def cmd_silent(self, c):
        """The SMF stops answering for `seconds` s (tep's Heartbeats go
        unanswered), then checks that tep forgot every session (their TEIDs
        get Error Indications, their UEs no downlink)."""
        time.sleep(c["seconds"])
        self.n4.setblocking(False)
        while True:
            try:
                self.n4.recvfrom(65535)
            except BlockingIOError:
                break
        gone = [self.sessions[i] for i in sorted(self.sessions)]
        for s in gone:
            self.forgotten(s)
        self.sessions.clear()
        return {"forgotten": len(gone)}

    def cmd_delete(self, c):
        """Session Deletion of the given sessions, pipelined; each Usage
        Report counts what its session carried since its last report."""
        sess = self.pick(c)
        msgs, by_seq = [], {}
        for s in sess:
            p = self.header(s.up_seid) / PFCPSessionDeletionRequest()
            msgs.append((p.seq, bytes(p)))
            by_seq[p.seq] = s
        got = self.exchange(msgs)
        totals = [0, 0, 0, 0]
        for seq, s in by_seq.items():
            where = "Session Deletion of UE %s" % s.ue
            body = self.expect_response(got[seq], DELETION_RESPONSE, s.cp_seid, ACCEPTED, where)
            rep = one_ie(body, IE_UsageReport_SDR, where)
            seqn = one_ie(rep, IE_UR_SEQN, where).number
            v = self.check_usage(s, body, IE_UsageReport_SDR, "TERMR", seqn, where,
                                 at=self.arrived.pop(seq, None))
            totals = [totals[0] + v[4], totals[1] + v[1], totals[2] + v[5], totals[3] + v[2]]
            del self.sessions[s.index]
        return {"deleted": len(sess), "ul_packets": totals[0], "ul_bytes": totals[1],
                "dl_packets": totals[2], "dl_bytes": totals[3]}

    def await_node_report(self, gnb, bit, since, wait):
        """The next Node Report Request within `wait` s, while the gNBs'
        sockets are read (and answered as they are set to): its report
        type must be UPFR (`bit` 1) or UPRR (2) and name `gnb` alone;
        returns seconds since `since`."""
        end = time.monotonic() + wait
        while not self.node_reports and time.monotonic() < end:
            for sock in self.gnb_socks:
                extra = self.drain(sock, 0)
                check(not extra, "path: datagrams at a gNB: %r" % extra[:2])
            self.pump(0.05)
        check(self.node_reports, "no Node Report Request within %.1f s" % wait)
        at, p = self.node_reports.pop(0)
        where = "Node Report Request"
        check(p.S == 0, "%s with an SEID" % where)
        nid = fqdn(one_ie(p.payload, IE_NodeId, where))
        check(nid == self.cfg["node_id"], "%s: Node ID %s" % (where, nid))
        # scapy 2.5 (Release 15) names bit 1 UPFR and calls bit 2 (UPRR,
        # Release 16) spare.
        t = one_ie(p.payload, IE_NodeReportType, where)
        check((t.UPFR, t.spare) == ((1, 0) if bit == 1 else (0, 1)), "%s: report type %r" % (where, t))
        if bit == 1:
            f = one_ie(p.payload, IE_UserPlanePathFailureReport, where)
            peer = one_ie(f, IE_RemoteGTP_U_Peer, where)
            check(peer.V4 == 1 and peer.ipv4 == gnb, "%s: peer %r, want %s" % (where, peer, gnb))
        else:
            # User Plane Path Recovery Report, IE 187, which scapy does not
            # know: one Remote GTP-U Peer (IE 103, V4) inside.
            r = one_ie(p.payload, IE_NotImplemented, where)
            raw = bytes(r)
            want = struct.pack("!HHHHB", 187, 9, 103, 5, 0x02) + socket.inet_aton(gnb)
            check(raw == want, "%s: recovery report %s, want %s" % (where, raw.hex(), want.hex()))
        check(not self.node_reports, "another Node Report Request: %r" % self.node_reports)
        return at - since

    def cmd_path(self, c):
        """Path supervision of the gNB of session `session`: tep's Echo
        Requests are answered, then not (`seconds` at most for the failure
        Node Report), then again (the recovery Node Report)."""
        s = self.sessions[c["session"]]
        wait = c["seconds"]
        end = time.monotonic() + wait
        while self.echo_requests.get(s.gnb, 0) == 0 and time.monotonic() < end:
            self.drain(self.gnb_socks[self.gnbs.index(s.gnb)], 0.05)
        answered = self.echo_requests.get(s.gnb, 0)
        check(answered > 0, "no Echo Request at %s within %.1f s" % (s.gnb, wait))
        check(not self.node_reports, "a Node Report Request while the gNB answers: %r" % self.node_reports)
        self.silent_gnbs.add(s.gnb)
        t0 = time.monotonic()
        failed_after = self.await_node_report(s.gnb, 1, t0, wait)
        unanswered = self.echo_requests[s.gnb] - answered
        self.silent_gnbs.discard(s.gnb)
        t1 = time.monotonic()
        recovered_after = self.await_node_report(s.gnb, 2, t1, wait)
        return {"failed_after_s": round(failed_after, 2), "recovered_after_s": round(recovered_after, 2),
                "unanswered_echo_requests": unanswered}

    def cmd_error_indication(self, c):
        """The gNB of session `session` sends tep an Error Indication for
        the session's downlink TEID (TS 29.281 §7.3.1): a Session Report
        Request with an Error Indication Report naming that F-TEID comes,
        answered; one for a TEID no session sends to brings none."""
        s = self.sessions[c["session"]]
        sock = self.gnb_socks[self.gnbs.index(s.gnb)]

        def error_indication(teid, seq):
            return bytes(GTPHeader(gtp_type=GTPU_ERROR_INDICATION, S=1, seq=seq, teid=0)
                         / GTPErrorIndication(IE_list=[IE_TEIDI(TEIDI=teid),
                                                       IE_GSNAddress(length=4, ipv4_address=s.gnb)]))

        sock.sendto(error_indication(s.dl_teid, 1), (self.upf, GTPU_PORT))
        end = time.monotonic() + 5
        while not self.reports and time.monotonic() < end:
            self.pump(0.1)
        check(self.reports, "no Session Report Request within 5 s of an Error Indication")
        data, p = self.reports.pop(0)
        where = "Error Indication Report"
        check(p.S == 1 and p.seid == s.cp_seid, "%s: SEID %r, want 0x%x" % (where, p.seid, s.cp_seid))
        rt = one_ie(p.payload, IE_ReportType, where)
        check(rt.ERIR == 1 and rt.DLDR == 0 and rt.USAR == 0, "%s: report type %r" % (where, rt))
        eir = one_ie(p.payload, IE_ErrorIndicationReport, where)
        f = one_ie(eir, IE_FTEID, where)
        check(f.V4 == 1 and f.TEID == s.dl_teid and f.ipv4 == s.gnb,
              "%s: remote F-TEID %r, want 0x%x at %s" % (where, f, s.dl_teid, s.gnb))
        rsp = PFCP(version=1, S=1, seid=s.up_seid, seq=p.seq) / PFCPSessionReportResponse(
            IE_list=[IE_Cause(cause=ACCEPTED)])
        self.n4.sendto(bytes(rsp), (self.upf, PFCP_PORT))
        sock.sendto(error_indication(0x7777_7777, 2), (self.upf, GTPU_PORT))
        self.pump(1.0)
        check(not self.reports, "a report for an Error Indication naming no session: %r" % self.reports)
        return {"reported_teid": s.dl_teid}

    # -- Usage reporting triggers ----------------------------------------------

    def urr_session(self, c, urr):
        """A new session (index `c["index"]`) whose URR 1 has the IEs `urr`."""
        s = Session(c["index"], self.cfg, self.gnbs[0])
        self.accept_establishment(s, self.request(self.establishment(s, urr=urr)))
        self.sessions[s.index] = s
        return s

    def await_reports(self, s, n, wait, where):
        """The next `n` Session Report Requests for `s` within `wait` s, each
        a Usage Report (Report Type USAR) answered Request accepted:
        [(arrival, [Usage Report fields])]."""
        out = []
        end = time.monotonic() + wait
        while len(out) < n:
            if not self.reports:
                check(time.monotonic() < end, "%s: %d of %d Session Report Requests within %.1f s"
                      % (where, len(out), n, wait))
                self.pump(0.01)
                continue
            data, p = self.reports.pop(0)
            at = self.report_times.pop(p.seq)
            check(p.S == 1 and p.seid == s.cp_seid, "%s: SEID %r, want 0x%x" % (where, p.seid, s.cp_seid))
            rt = one_ie(p.payload, IE_ReportType, where)
            check(rt.USAR == 1 and rt.DLDR == 0, "%s: report type %r" % (where, rt))
            reps = [self.usage_fields(r, where) for r in ies(p.payload, IE_UsageReport_SRR)]
            check(reps, "%s: no Usage Report" % where)
            rsp = PFCP(version=1, S=1, seid=s.up_seid, seq=p.seq) / PFCPSessionReportResponse(
                IE_list=[IE_Cause(cause=ACCEPTED)]
            )
            self.n4.sendto(bytes(rsp), (self.upf, PFCP_PORT))
            out.append((at, reps))
        return out

    def usage_fields(self, rep, where):
        """A Usage Report's URR ID, UR-SEQN, triggers set, Start and End
        Time (NTP seconds, around now), volume and duration."""
        trig = one_ie(rep, IE_UsageReportTrigger, where)
        names = [f.name for f in trig.fields_desc if f.name != "extra_data" and getattr(trig, f.name) == 1]
        out = {"urr": one_ie(rep, IE_URR_Id, where).id, "seqn": one_ie(rep, IE_UR_SEQN, where).number,
               "triggers": names}
        if names in (["START"], ["STOPT"]):
            return out
        start = one_ie(rep, IE_StartTime, where).timestamp
        end = one_ie(rep, IE_EndTime, where).timestamp
        now = int(time.time()) + NTP_UNIX
        check(start <= end and abs(end - now) <= 5,
              "%s: Start Time %d, End Time %d, now %d" % (where, start, end, now))
        out["period"] = end - start
        out["volume"] = volume(one_ie(rep, IE_VolumeMeasurement, where))
        d = ies(rep, IE_DurationMeasurement)
        if d:
            out["duration"] = d[0].duration
        return out

    def uplink_until_report(self, s, size, where):
        """Uplink datagrams of `size` octets, one at a time (each reaching
        the DN before the next leaves), until tep sends a Session Report
        Request: how many went."""
        n = 0
        while not self.reports:
            check(n < 100, "%s: no report after %d datagrams" % (where, n))
            self.uplink([s], sizes=[size])
            n += 1
            self.pump(0.05)
        return n

    def uplink_until_dropped_report(self, s, size, where):
        """Uplink datagrams of `size` octets one at a time, which may be
        dropped (a quota), until tep sends a Session Report Request: how
        many went; what reached the DN is added to `s.ul`."""
        sock = self.gnb_socks[self.gnbs.index(s.gnb)]
        n = 0
        while not self.reports:
            check(n < 100, "%s: no report after %d datagrams" % (where, n))
            b, inner_len, _ = self.gpdu(s, 5000 + n, size)
            sock.sendto(b, (self.upf, GTPU_PORT))
            n += 1
            got = self.drain(self.dn_sock, 0.05)
            s.ul[0] += len(got)
            s.ul[1] += inner_len * len(got)
            self.pump(0.02)
        return n

    def burst_to_upf(self, sock, packets):
        """Sends `packets` to the UPF's GTP-U port from `sock` as fast as
        the socket takes them (waiting only when its buffer is full)."""
        for b in packets:
            while True:
                try:
                    sock.sendto(b, (self.upf, GTPU_PORT))
                    break
                except BlockingIOError:
                    select.select([], [sock], [], 0.01)

    def cmd_volume_burst(self, c):
        """A session whose URR has a total Volume Threshold (`threshold`,
        VOLTH) or Volume Quota (`quota`, VOLQU) of octets; `count` uplink
        datagrams of `size` octets built first, then sent as fast as the
        socket takes them: the first report's volume, the octets that
        reached the DN, and how long the sending took."""
        where = "volume burst"
        size, count = c["size"], c["count"]
        if "quota" in c:
            urr = [IE_MeasurementMethod(VOLUM=1), IE_ReportingTriggers(volume_quota=1),
                   IE_VolumeQuota(TOVOL=1, total=c["quota"])]
        else:
            urr = [IE_MeasurementMethod(VOLUM=1), IE_ReportingTriggers(volume_threshold=1),
                   IE_VolumeThreshold(TOVOL=1, total=c["threshold"])]
        s = self.urr_session(c, urr)
        sock = self.gnb_socks[self.gnbs.index(s.gnb)]
        # Room at the DN for every datagram (SO_RCVBUFFORCE: root).
        self.dn_sock.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)
        packets = [self.gpdu(s, 9000 + k, size)[0] for k in range(count)]
        t0 = time.monotonic()
        self.burst_to_upf(sock, packets)
        took = time.monotonic() - t0
        got = self.drain(self.dn_sock, 0.5)
        [(_, reps)] = self.await_reports(s, 1, 2.0, where)
        r = reps[0]
        # The rest of the burst may cross the threshold again: gone with
        # the session, with its reports.
        req = self.header(s.up_seid) / PFCPSessionDeletionRequest()
        self.expect_response(self.request(req), DELETION_RESPONSE, s.cp_seid, ACCEPTED, "deletion")
        del self.sessions[s.index]
        self.pump(0.2)
        self.reports = [x for x in self.reports if x[1].seid != s.cp_seid]
        return {"reported": r["volume"][0], "triggers": r["triggers"], "received": len(got) * size,
                "sent": count, "seconds": round(took, 4)}

    def cmd_voice_burst(self, c):
        """The qos_flows session with URR 2 on the voice PDRs only, with a
        total Volume Threshold (`threshold`, VOLTH) or Volume Quota
        (`quota`, VOLQU) of octets; `count` uplink voice datagrams (QFI 1,
        from the UE's port 5005) of `size` octets sent as fast as the
        socket takes them, then, once URR 2 reported, `count` of the
        default flow (QFI 9): URR 2's first report's volume, the voice and
        default octets that reached the DN, how long the voice sending
        took."""
        where = "voice burst"
        size, count = c["size"], c["count"]
        if "quota" in c:
            urr = [IE_ReportingTriggers(volume_quota=1), IE_VolumeQuota(TOVOL=1, total=c["quota"])]
        else:
            urr = [IE_ReportingTriggers(volume_threshold=1),
                   IE_VolumeThreshold(TOVOL=1, total=c["threshold"])]
        s = Session(c["index"], self.cfg, self.gnbs[0])
        self.accept_establishment(s, self.request(self.qos_flows_establishment(s, voice_urr=urr)),
                                  shared=[1, 3, 5])
        self.sessions[s.index] = s
        sock = self.gnb_socks[self.gnbs.index(s.gnb)]
        self.dn_sock.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)

        def gpdu(qfi, sport, k):
            tag = b"ul %d %d " % (s.index, k)
            inner = (IP(src=s.ue, dst=self.dn, ttl=64) / UDP(sport=sport, dport=self.dn_port)
                     / Raw(tag + b"." * (size - 28 - len(tag))))
            return bytes(GTP_U_Header(teid=s.ul_teid, gtp_type=255)
                         / GTPPDUSessionContainer(type=1, QFI=qfi) / inner)

        def send(packets):
            self.burst_to_upf(sock, packets)

        def octets(got, sport):
            return sum(len(d) + 28 for d, src in got if src[1] == sport)

        voice = [gpdu(1, 5005, k) for k in range(count)]
        default = [gpdu(QFI, s.port, count + k) for k in range(count)]
        t0 = time.monotonic()
        send(voice)
        took = time.monotonic() - t0
        got = self.drain(self.dn_sock, 0.5)
        [(_, reps)] = self.await_reports(s, 1, 2.0, where)
        check([r["urr"] for r in reps] == [2], "%s: Usage Reports of URRs %r" % (where, reps))
        send(default)
        got += self.drain(self.dn_sock, 0.5)
        req = self.header(s.up_seid) / PFCPSessionDeletionRequest()
        self.expect_response(self.request(req), DELETION_RESPONSE, s.cp_seid, ACCEPTED, "deletion")
        del self.sessions[s.index]
        self.pump(0.2)
        self.reports = [x for x in self.reports if x[1].seid != s.cp_seid]
        return {"reported": reps[0]["volume"][0], "triggers": reps[0]["triggers"],
                "voice": octets(got, 5005), "default": octets(got, s.port), "sent": count,
                "seconds": round(took, 4)}

    def cmd_volume_threshold(self, c):
        """A session whose URR reports at a total Volume Threshold of
        `threshold` octets (VOLTH); uplink datagrams of `size` octets one at
        a time: one report (VOLTH, UR-SEQN 0) counting exactly what reached
        the DN, which is within one datagram past the threshold."""
        where = "volume threshold"
        size, threshold = c["size"], c["threshold"]
        s = self.urr_session(c, [
            IE_MeasurementMethod(VOLUM=1),
            IE_ReportingTriggers(volume_threshold=1),
            IE_VolumeThreshold(TOVOL=1, total=threshold),
        ])
        n = self.uplink_until_report(s, size, where)
        [(_, [r])] = self.await_reports(s, 1, 1.0, where)
        check(r["urr"] == 1 and r["seqn"] == 0 and "VOLTH" in r["triggers"], "%s: %r" % (where, r))
        total = r["volume"][0]
        check(total == s.ul[1], "%s: reported %d octets, %d reached the DN" % (where, total, s.ul[1]))
        check(total - size < threshold <= total,
              "%s: %d octets reported for a threshold of %d (datagrams of %d)" % (where, total, threshold, size))
        s.ul = [0, 0]
        return {"packets": n, "reported": total}

    def cmd_quota(self, c):
        """A session whose URR has a Volume Quota of `quota` octets (VOLQU);
        uplink datagrams of `size` octets one at a time until the report
        (VOLQU, counting what reached the DN); then `after` datagrams each
        way reach nobody; an Update URR with a new quota lets traffic through
        again."""
        where = "volume quota"
        size, quota, after = c["size"], c["quota"], c["after"]
        s = self.urr_session(c, [
            IE_MeasurementMethod(VOLUM=1),
            IE_ReportingTriggers(volume_quota=1),
            IE_VolumeQuota(TOVOL=1, total=quota),
        ])
        n = self.uplink_until_dropped_report(s, size, where)
        [(_, [r])] = self.await_reports(s, 1, 1.0, where)
        check("VOLQU" in r["triggers"], "%s: %r" % (where, r))
        total = r["volume"][0]
        # The datagram that would go beyond the quota is the first dropped.
        check(total == s.ul[1] and total <= quota < total + size,
              "%s: reported %d octets, %d reached the DN, quota %d" % (where, total, s.ul[1], quota))
        s.ul = [0, 0]
        sock = self.gnb_socks[self.gnbs.index(s.gnb)]
        for k in range(after):
            sock.sendto(self.gpdu(s, 1000 + k, size)[0], (self.upf, GTPU_PORT))
            self.send_downlink(s, 1000 + k, size)
        check(not self.drain(self.dn_sock, 0.5), "%s: uplink reached the DN past the quota" % where)
        check(not self.drain(sock, 0), "%s: downlink reached the gNB past the quota" % where)
        upd = IE_UpdateURR(IE_list=[IE_URR_Id(id=1), IE_VolumeQuota(TOVOL=1, total=quota)])
        req = self.header(s.up_seid) / PFCPSessionModificationRequest(IE_list=[upd])
        self.expect_response(self.request(req), MODIFICATION_RESPONSE, s.cp_seid, ACCEPTED, "a new quota")
        self.uplink([s], sizes=[size])
        self.downlink([s], sizes=[size])
        return {"packets": n, "reported": total, "blocked": after}

    def cmd_periodic(self, c):
        """A session whose URR reports every `period` s (PERIO, volume and
        duration measured); one uplink datagram; the first `count` reports'
        arrival (s after the establishment response), gaps, volumes and
        durations; then the session is deleted."""
        where = "periodic report"
        s = self.urr_session(c, [
            IE_MeasurementMethod(VOLUM=1, DURAT=1),
            IE_ReportingTriggers(periodic_reporting=1),
            IE_MeasurementPeriod(period=c["period"]),
        ])
        t0 = time.monotonic()
        self.uplink([s], sizes=[300])
        got = self.await_reports(s, c["count"], c["period"] * c["count"] + 2, where)
        seqns = [r[1][0]["seqn"] for r in got]
        check(seqns == list(range(c["count"])), "%s: UR-SEQNs %r" % (where, seqns))
        for _, [r] in got:
            check(r["triggers"] == ["PERIO"] and "duration" in r, "%s: %r" % (where, r))
        at = [round(a - t0, 3) for a, _ in got]
        vols = [r[0]["volume"][0] for _, r in got]
        check(vols[0] == 300 and sum(vols[1:]) == 0, "%s: volumes %r, want 300 then 0" % (where, vols))
        req = self.header(s.up_seid) / PFCPSessionDeletionRequest()
        self.expect_response(self.request(req), DELETION_RESPONSE, s.cp_seid, ACCEPTED, "deletion")
        del self.sessions[s.index]
        self.reports = [r for r in self.reports if r[1].seid != s.cp_seid]
        return {"at": at, "gaps": [round(b - a, 3) for a, b in zip(at, at[1:])], "volumes": vols,
                "durations": [r[0]["duration"] for _, r in got]}

    # -- N9: an intermediate UPF with an uplink classifier, a PSA behind --------

    @contextlib.contextmanager
    def swapped(self, **attrs):
        """Runs the body with attributes of this Lab replaced (another
        UPF's address for PFCP and GTP-U, another data network's socket)."""
        old = {k: getattr(self, k) for k in attrs}
        for k, v in attrs.items():
            setattr(self, k, v)
        try:
            yield
        finally:
            for k, v in old.items():
                setattr(self, k, v)

    def psa_session(self, s):
        """The PSA's part of session `s` (TS 23.501 §5.6.4): uplink PDR 1
        from the I-UPF (Access: F-TEID CHOOSE, QFI 9: only G-PDUs whose UL
        PDU Session Container carries it match), to the core; downlink
        PDR 2 (the UE's address), FAR 2 dropping until the I-UPF's N9
        F-TEID is known."""
        return self.header(0) / PFCPSessionEstablishmentRequest(IE_list=[
            IE_NodeId(id_type="IPv4", ipv4=self.smf),
            IE_FSEID(v4=1, seid=s.cp_seid, ipv4=self.smf),
            IE_CreatePDR(IE_list=[
                IE_PDR_Id(id=1), IE_Precedence(precedence=200),
                IE_PDI(IE_list=[IE_SourceInterface(interface="Access"), IE_FTEID(CH=1, V4=1), IE_QFI(QFI=QFI)]),
                IE_OuterHeaderRemoval(header="GTP-U/UDP/IPv4"),
                IE_FAR_Id(id=1), IE_QER_Id(id=1),
            ]),
            IE_CreatePDR(IE_list=[
                IE_PDR_Id(id=2), IE_Precedence(precedence=200),
                IE_PDI(IE_list=[IE_SourceInterface(interface="Core"), IE_UE_IP_Address(SD=1, V4=1, ipv4=s.ue)]),
                IE_FAR_Id(id=2), IE_QER_Id(id=1),
            ]),
            IE_CreateFAR(IE_list=[IE_FAR_Id(id=1), IE_ApplyAction(FORW=1), IE_ForwardingParameters(
                IE_list=[IE_DestinationInterface(interface="Core")])]),
            IE_CreateFAR(IE_list=[IE_FAR_Id(id=2), IE_ApplyAction(DROP=1)]),
            IE_CreateQER(IE_list=[IE_QER_Id(id=1), IE_GateStatus(ul="OPEN", dl="OPEN"), IE_QFI(QFI=QFI)]),
        ])

    def iupf_session(self, s, local, psa_teid):
        """The I-UPF's part: uplink PDRs 1 and 3 on one F-TEID (CHOOSE ID
        1), QFI 9; PDR 3 (precedence 100) takes what goes to `local` (an
        SDF filter) to this UPF's own N6, PDR 1 the rest to the PSA on N9
        (FAR 1: Core, outer header to the PSA's F-TEID, marked DSCP
        `N9_DSCP`); downlink PDR 2
        from N6 (the UE's address) and PDR 4 from N9 (F-TEID CHOOSE ID 2,
        outer header removal) to the gNB (FAR 2)."""
        def uplink(pdr, precedence, far, extra):
            return IE_CreatePDR(IE_list=[
                IE_PDR_Id(id=pdr), IE_Precedence(precedence=precedence),
                IE_PDI(IE_list=[IE_SourceInterface(interface="Access"),
                                IE_FTEID(CH=1, CHID=1, V4=1, choose_id=1), IE_QFI(QFI=QFI)] + extra),
                IE_OuterHeaderRemoval(header="GTP-U/UDP/IPv4"),
                IE_FAR_Id(id=far), IE_QER_Id(id=1),
            ])
        flow = "permit out ip from %s to assigned" % local
        return self.header(0) / PFCPSessionEstablishmentRequest(IE_list=[
            IE_NodeId(id_type="IPv4", ipv4=self.smf),
            IE_FSEID(v4=1, seid=s.cp_seid, ipv4=self.smf),
            uplink(1, 200, 1, []),
            uplink(3, 100, 3, [IE_SDF_Filter(FD=1, flow_description=flow)]),
            IE_CreatePDR(IE_list=[
                IE_PDR_Id(id=2), IE_Precedence(precedence=200),
                IE_PDI(IE_list=[IE_SourceInterface(interface="Core"), IE_UE_IP_Address(SD=1, V4=1, ipv4=s.ue)]),
                IE_FAR_Id(id=2), IE_QER_Id(id=1),
            ]),
            IE_CreatePDR(IE_list=[
                IE_PDR_Id(id=4), IE_Precedence(precedence=200),
                IE_PDI(IE_list=[IE_SourceInterface(interface="Core"), IE_FTEID(CH=1, CHID=1, V4=1, choose_id=2)]),
                IE_OuterHeaderRemoval(header="GTP-U/UDP/IPv4"),
                IE_FAR_Id(id=2), IE_QER_Id(id=1),
            ]),
            IE_CreateFAR(IE_list=[IE_FAR_Id(id=1), IE_ApplyAction(FORW=1), IE_ForwardingParameters(IE_list=[
                IE_DestinationInterface(interface="Core"),
                IE_OuterHeaderCreation(GTPUUDPIPV4=1, TEID=psa_teid, ipv4=self.cfg["psa"]),
                IE_TransportLevelMarking(tos=N9_DSCP << 2, traffic_class=0xFC),
            ])]),
            IE_CreateFAR(IE_list=[IE_FAR_Id(id=2), IE_ApplyAction(FORW=1), IE_ForwardingParameters(IE_list=[
                IE_DestinationInterface(interface="Access"),
                IE_OuterHeaderCreation(GTPUUDPIPV4=1, TEID=s.dl_teid, ipv4=s.gnb),
            ])]),
            IE_CreateFAR(IE_list=[IE_FAR_Id(id=3), IE_ApplyAction(FORW=1), IE_ForwardingParameters(
                IE_list=[IE_DestinationInterface(interface="Core")])]),
            IE_CreateQER(IE_list=[IE_QER_Id(id=1), IE_GateStatus(ul="OPEN", dl="OPEN"), IE_QFI(QFI=QFI)]),
        ])

    def created_teids(self, got, s, where):
        """{PDR ID: TEID} of a Session Establishment Response's Created
        PDRs (F-TEIDs on this UPF's address); sets the UP SEID."""
        body = self.expect_response(got, ESTABLISHMENT_RESPONSE, s.cp_seid, ACCEPTED, where)
        s.up_seid = one_ie(body, IE_FSEID, where).seid
        out = {}
        for c in ies(body, IE_CreatedPDR):
            t = one_ie(c, IE_FTEID, where)
            check(t.V4 == 1 and t.ipv4 == self.upf, "%s: F-TEID %r, want one on %s" % (where, t, self.upf))
            out[one_ie(c, IE_PDR_Id, where).id] = t.TEID
        return out

    def cmd_n9(self, c):
        """Two tep UPFs on one PDU session: the I-UPF (`upf`, an uplink
        classifier) in front, the PSA (`psa`) behind it on N9, each with
        its own PFCP association. Uplink from the gNB to `psa_dn` (the
        PSA's data network, a socket in `psa_ns`) goes through both; uplink
        to the local data network (`dn`) leaves the I-UPF on its own N6;
        downlink from either comes back to the gNB with the session's TEID
        and QFI (from the PSA through N9 and the I-UPF)."""
        psa, psa_dn = self.cfg["psa"], self.cfg["psa_dn"]
        here = os.open("/proc/self/ns/net", os.O_RDONLY)
        enter_netns("/var/run/netns/" + self.cfg["psa_ns"])
        psa_sock = udp_socket(psa_dn, self.dn_port)
        libc = ctypes.CDLL(None, use_errno=True)
        check(libc.setns(here, CLONE_NEWNET) == 0, "setns back")
        os.close(here)
        s = Session(c["index"], self.cfg, self.gnbs[0])
        at_psa = Session(c["index"], self.cfg, self.gnbs[0])
        at_psa.cp_seid += 0x0100_0000
        with self.swapped(upf=psa, cfg=dict(self.cfg, node_id=self.cfg["psa_node_id"]), tep_recovery=None):
            self.cmd_associate({})
            psa_teids = self.created_teids(self.request(self.psa_session(at_psa)), at_psa, "PSA establishment")
        check(list(psa_teids) == [1], "PSA: Created PDRs %r, want [1]" % psa_teids)
        teids = self.created_teids(self.request(self.iupf_session(s, self.cfg["local_prefix"], psa_teids[1])),
                                   s, "I-UPF establishment")
        check(sorted(teids) == [1, 3, 4] and teids[1] == teids[3] != teids[4],
              "I-UPF: Created PDRs %r, want 1 and 3 on one TEID, 4 on another" % teids)
        s.ul_teid = teids[1]
        # The PSA's downlink to the I-UPF's N9 F-TEID.
        iupf = self.upf
        with self.swapped(upf=psa):
            self.expect_response(self.request(self.update_far2(at_psa, ["FORW"], gnb=iupf, teid=teids[4])),
                                 MODIFICATION_RESPONSE, at_psa.cp_seid, ACCEPTED, "PSA: FAR 2 to N9")
        n = c.get("count", 3)
        out = {"psa_teid": psa_teids[1], "n9_teid": teids[4]}
        with self.swapped(dn=psa_dn, dn_sock=psa_sock):
            out["n9_uplink"] = self.uplink([s], sizes=[100 + i for i in range(n)])
            out["n9_downlink"] = self.downlink([s], sizes=[120 + i for i in range(n)])
        check(not self.drain(psa_sock, 0.2), "more at the PSA's data network")
        out["local_uplink"] = self.uplink([s], sizes=[140 + i for i in range(n)])
        out["local_downlink"] = self.downlink([s], sizes=[160 + i for i in range(n)])
        check(not self.drain(psa_sock, 0), "the local branch reached the PSA")
        for sess, addr in ((s, self.upf), (at_psa, psa)):
            with self.swapped(upf=addr):
                self.expect_response(self.request(self.header(sess.up_seid) / PFCPSessionDeletionRequest()),
                                     DELETION_RESPONSE, sess.cp_seid, ACCEPTED, "deletion at %s" % addr)
        psa_sock.close()
        return out

    def socket_in(self, ns, addr, port):
        """A UDP socket bound to `addr`:`port` in namespace `ns`."""
        home = os.open("/proc/self/ns/net", os.O_RDONLY)
        enter_netns("/var/run/netns/" + ns)
        sock = udp_socket(addr, port)
        libc = ctypes.CDLL(None, use_errno=True)
        check(libc.setns(home, CLONE_NEWNET) == 0, "setns back")
        os.close(home)
        return sock

    def cmd_networks(self, c):
        """Two data networks: "internet" (the DN host in `dn_ns`) and "ims"
        (a host with the same address in `c["dn2_ns"]`, behind its own TUN),
        a session in each (`first`, `first` + 1) with the same UE address
        and port. Each session's uplink reaches its own network's host and
        not the other; a datagram from each host to the UE reaches the gNB
        with its own session's TEID. A session naming a network tep does
        not have (`first` + 2, "iot") is refused: Rule creation/modification
        Failure, PDR 1, Offending IE Network Instance (22)."""
        dn2 = self.socket_in(c["dn2_ns"], self.dn, self.dn_port)
        try:
            return self.networks(c, dn2)
        finally:
            dn2.close()

    def one_ue_in_two_networks(self, first):
        """Sessions `first` ("internet") and `first` + 1 ("ims") with the
        same UE address and port, established; both."""
        a = Session(first, self.cfg, self.gnbs[0])
        b = Session(first + 1, self.cfg, self.gnbs[0])
        b.ue, b.port = a.ue, a.port
        for s, dnn in ((a, "internet"), (b, "ims")):
            self.accept_establishment(s, self.request(self.establishment(s, dnn=dnn)))
            self.sessions[s.index] = s
        return a, b

    def networks(self, c, dn2):
        first = c["first"]
        a, b = self.one_ue_in_two_networks(first)
        check(a.ul_teid != b.ul_teid, "one uplink TEID for two sessions")
        for n, (s, mine, other) in enumerate(((a, self.dn_sock, dn2), (b, dn2, self.dn_sock))):
            g, _, payload = self.gpdu(s, n, 100)
            self.gnb_socks[0].sendto(g, (self.upf, GTPU_PORT))
            got = self.await_one(mine)
            check(got == [(payload, (s.ue, s.port))],
                  "uplink of session %d: its network's host got %r" % (s.index, got))
            stray = self.drain(other, 0.1)
            check(not stray, "uplink of session %d reached the other network: %r" % (s.index, stray))
        want = {}
        for n, (s, sock) in enumerate(((a, self.dn_sock), (b, dn2))):
            p = self.downlink_payload(s, n, 100)
            sock.sendto(p, (s.ue, s.port))
            want[p] = (s, 100)
        self.collect_downlink(want, 5.0)
        check(not want, "downlink: %d of 2 did not reach the gNB: %r" % (len(want), list(want)))
        iot = Session(first + 2, self.cfg, self.gnbs[0])
        got = self.request(self.establishment(iot, dnn="iot"))
        refused = self.expect_rule_failure(got, ESTABLISHMENT_RESPONSE, iot, "unknown Network Instance", (0, 1), 22)
        return {"uplink": 2, "downlink": 2, "unknown": refused}

    def dn_raw_socket(self, dev):
        """An AF_PACKET socket on `dev` in `dn_ns` (no 8021q there: it
        reads and writes the tagged frames itself), and its MAC."""
        home = os.open("/proc/self/ns/net", os.O_RDONLY)
        enter_netns("/var/run/netns/" + self.cfg["dn_ns"])
        raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        raw.bind((dev, 0))
        mac = raw.getsockname()[4]
        libc = ctypes.CDLL(None, use_errno=True)
        check(libc.setns(home, CLONE_NEWNET) == 0, "setns back")
        os.close(home)
        # The kernel moves a received tag into the packet's metadata.
        raw.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        return raw, mac

    def cmd_vlan_networks(self, c):
        """Two data networks on VLANs of a gateway's inner interface:
        "internet" (VID 10) and "ims" (VID 20), a session in each (`first`,
        `first` + 1) with the same UE address and port; the DN side is an
        AF_PACKET socket on `c["dev"]` in `dn_ns` (no 8021q there), which
        reads and writes the tagged frames itself. Each session's uplink
        leaves tagged with its network's VID; a tagged datagram to the UE
        reaches the gNB with the TEID of the session of that VID's network.
        Then a frame of an unknown VID (30) and an untagged one, to the same
        UE: neither reaches a gNB. A first uplink packet, before the next
        hop is known, leaves nowhere."""
        raw, mac = self.dn_raw_socket(c["dev"])
        try:
            return self.vlan_networks(c, raw, mac)
        finally:
            raw.close()

    def tagged_frames(self, raw, wait, until=None):
        """The frames `raw` reads within `wait` s, as [(VID or None,
        Ether without its tag)]; sooner where `until(frames)` holds."""
        out = []
        end = time.monotonic() + wait
        while until is None or not until(out):
            r, _, _ = select.select([raw], [], [], max(0, end - time.monotonic()))
            if not r:
                return out
            data, anc, _, _ = raw.recvmsg(65535, 256)
            vid = None
            for level, kind, aux in anc:
                if level == SOL_PACKET and kind == PACKET_AUXDATA and len(aux) >= 20:
                    status, tci = struct.unpack_from("=I", aux)[0], struct.unpack_from("=H", aux, 16)[0]
                    if status & TP_STATUS_VLAN_VALID:
                        vid = tci & 0xFFF
            eth = Ether(data)
            if Dot1Q in eth:
                vid = eth[Dot1Q].vlan
                eth = Ether(src=eth.src, dst=eth.dst, type=eth[Dot1Q].type) / eth[Dot1Q].payload
            out.append((vid, eth))
        return out

    def tagged_udp(self, raw, wait):
        """The UDP datagrams to the DN port that `raw` reads within `wait`
        s: [(VID or None, source, sport, payload)]."""
        return [(vid, eth[IP].src, eth[UDP].sport, bytes(eth[UDP].payload))
                for vid, eth in self.tagged_frames(raw, wait)
                if IP in eth and UDP in eth and eth[UDP].dport == self.dn_port]

    def vlan_networks(self, c, raw, mac):
        first = c["first"]
        a, b = self.one_ue_in_two_networks(first)
        # The first packet to a destination the workers have no next hop
        # for is dropped (the kernel would send it untagged); it asks.
        g, _, payload = self.gpdu(a, 9, 100)
        self.gnb_socks[0].sendto(g, (self.upf, GTPU_PORT))
        first = [x for x in self.tagged_udp(raw, 0.5) if x[3] == payload]
        check(not first, "the first uplink went out before its next hop was known: %r" % first)
        for n, (s, vid) in enumerate(((a, 10), (b, 20))):
            g, _, payload = self.gpdu(s, n, 100)
            self.gnb_socks[0].sendto(g, (self.upf, GTPU_PORT))
            got = [x for x in self.tagged_udp(raw, 1.0) if x[3] == payload]
            check(got == [(vid, s.ue, s.port, payload)],
                  "uplink of session %d: want one frame on VID %d, got %r" % (s.index, vid, got))
        want = {}

        def frame(s, vid, p):
            eth = Ether(src=mac, dst=c["upf_mac"])
            if vid:
                eth = eth / Dot1Q(vlan=vid)
            return bytes(eth / IP(src=self.dn, dst=s.ue) / UDP(sport=self.dn_port, dport=s.port) / Raw(p))

        for n, (s, vid) in enumerate(((a, 10), (b, 20))):
            p = self.downlink_payload(s, n, 100)
            raw.send(frame(s, vid, p))
            want[p] = (s, 100)
        self.collect_downlink(want, 5.0)
        check(not want, "downlink: %d of 2 did not reach the gNB: %r" % (len(want), list(want)))
        for n, vid in ((2, 30), (3, None)):
            raw.send(frame(a, vid, self.downlink_payload(a, n, 100)))
        stray = self.drain(self.gnb_socks[0], 0.5)
        check(not stray, "a frame of no data network reached the gNB: %r" % stray)
        return {"uplink": 2, "downlink": 2, "strays": 2}

    def cmd_vlan_routers(self, c):
        """`vlan_networks` where each VLAN's network has its own router
        (`c["routers"]`: [{vid, address, gateway, mac}]) that tep resolves
        by ARP, with no neighbour entry anywhere: the DN side answers tep's
        request for each router (tagged, as that router's MAC), asks for
        tep's address on each VLAN as a third host and checks the answer
        (tep's inner MAC, tagged in the same VLAN), then each session's
        uplink leaves tagged to its own network's router and each tagged
        downlink reaches its session."""
        raw, mac = self.dn_raw_socket(c["dev"])
        try:
            return self.vlan_routers(c, raw, mac)
        finally:
            raw.close()

    def answer_router_requests(self, raw, routers, upf_mac):
        """Answers tep's ARP requests for each router (waiting for each
        up to 5 s); returns the requests seen, [(vid, ARP)]."""
        pending = {r["vid"]: r for r in routers}
        seen = []
        end = time.monotonic() + 5.0
        while pending and time.monotonic() < end:
            for vid, eth in self.tagged_frames(raw, 0.2):
                if ARP not in eth or eth[ARP].op != 1 or vid not in pending:
                    continue
                a, r = eth[ARP], pending[vid]
                check((eth.src, eth.dst, a.hwsrc, a.psrc, a.pdst)
                      == (upf_mac, "ff:ff:ff:ff:ff:ff", upf_mac, r["address"], r["gateway"]),
                      "VID %d: tep's request %r" % (vid, eth.summary()))
                seen.append((vid, a))
                reply = (Ether(src=r["mac"], dst=upf_mac) / Dot1Q(vlan=vid)
                         / ARP(op=2, hwsrc=r["mac"], psrc=r["gateway"], hwdst=upf_mac, pdst=r["address"]))
                raw.send(bytes(reply))
                del pending[vid]
        check(not pending, "tep asked for no router on VID(s) %r" % list(pending))
        return seen

    def ask_tep(self, raw, routers, upf_mac):
        """A third host on each VLAN asks for tep's address there: the
        answer is tep's inner MAC, in the same VLAN."""
        host = "02:00:00:00:99:01"
        for r in routers:
            me = r["address"].rsplit(".", 1)[0] + ".9"
            ask = (Ether(src=host, dst="ff:ff:ff:ff:ff:ff") / Dot1Q(vlan=r["vid"])
                   / ARP(op=1, hwsrc=host, psrc=me, pdst=r["address"]))
            raw.send(bytes(ask))
            def answers(frames):
                return [(vid, eth) for vid, eth in frames if ARP in eth and eth[ARP].op == 2]

            got = answers(self.tagged_frames(raw, 2.0, answers))
            check(len(got) == 1, "VID %d: want one answer for %s, got %r" % (r["vid"], r["address"], got))
            vid, eth = got[0]
            a = eth[ARP]
            check((vid, eth.src, eth.dst, a.hwsrc, a.psrc, a.hwdst, a.pdst)
                  == (r["vid"], upf_mac, host, upf_mac, r["address"], host, me),
                  "VID %d: tep's answer %r (VID %r)" % (r["vid"], eth.summary(), vid))
        # A stranger's announcement of another address changes nothing.
        for r in routers:
            other = r["address"].rsplit(".", 1)[0] + ".7"
            garp = (Ether(src=host, dst="ff:ff:ff:ff:ff:ff") / Dot1Q(vlan=r["vid"])
                    / ARP(op=2, hwsrc=host, psrc=other, hwdst="ff:ff:ff:ff:ff:ff", pdst=other))
            raw.send(bytes(garp))

    def vlan_routers(self, c, raw, mac):
        routers, upf_mac = c["routers"], c["upf_mac"]
        first = c["first"]
        a, b = self.one_ue_in_two_networks(first)
        # The first packets wait for their router's MAC: dropped, and tep
        # asks (its requests at start went before this socket listened).
        for n, s in enumerate((a, b)):
            g, _, _ = self.gpdu(s, 90 + n, 100)
            self.gnb_socks[0].sendto(g, (self.upf, GTPU_PORT))
        seen = self.answer_router_requests(raw, routers, upf_mac)
        self.ask_tep(raw, routers, upf_mac)
        for n, (s, r) in enumerate(zip((a, b), routers)):
            g, _, payload = self.gpdu(s, n, 100)
            self.gnb_socks[0].sendto(g, (self.upf, GTPU_PORT))
            got = [(vid, eth.src, eth.dst, eth[IP].src, eth[UDP].sport)
                   for vid, eth in self.tagged_frames(raw, 1.0)
                   if IP in eth and UDP in eth and bytes(eth[UDP].payload) == payload]
            check(got == [(r["vid"], upf_mac, r["mac"], s.ue, s.port)],
                  "uplink of session %d: want one frame on VID %d to %s, got %r" % (s.index, r["vid"], r["mac"], got))
        want = {}
        for n, (s, r) in enumerate(zip((a, b), routers)):
            p = self.downlink_payload(s, n, 100)
            raw.send(bytes(Ether(src=r["mac"], dst=upf_mac) / Dot1Q(vlan=r["vid"])
                           / IP(src=self.dn, dst=s.ue) / UDP(sport=self.dn_port, dport=s.port) / Raw(p)))
            want[p] = (s, 100)
        self.collect_downlink(want, 5.0)
        check(not want, "downlink: %d of 2 did not reach the gNB: %r" % (len(want), list(want)))
        return {"uplink": 2, "downlink": 2, "requests": len(seen)}

    def cmd_stats(self, c):
        return {"sessions": len(self.sessions), "heartbeats_answered": self.heartbeats_answered,
                "retransmissions": self.retransmissions, "unanswered_reports": len(self.reports)}


def main():
    cfg = json.load(open(sys.argv[1]))
    lab = Lab(cfg)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        c = json.loads(line)
        name = c["run"]
        try:
            r = getattr(lab, "cmd_" + name)(c)
        except Mismatch as e:
            print(json.dumps({"run": name, "ok": False, "error": str(e)}), flush=True)
            print("smf.py: %s: %s" % (name, e), file=sys.stderr)
            sys.exit(1)
        r = dict(r or {})
        r.update({"run": name, "ok": True})
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
