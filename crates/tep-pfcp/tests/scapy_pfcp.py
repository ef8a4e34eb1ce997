#!/usr/bin/python3
"""PFCP messages from scapy's contrib/pfcp.py (Debian's python3-scapy), the
peer tep-pfcp is checked against.

  scapy_pfcp.py generate   writes tests/vectors/scapy.hex: one message per
                           line, "<name> <hex>"; tests/scapy.rs parses them
                           with tep-pfcp and compares with the reprs it
                           expects.
  scapy_pfcp.py seeds      writes fuzz/seeds/pfcp/ (the fuzz target's seeds)
                           from tests/vectors/scapy.hex, one file per
                           message, and two messages bundled (FO); plain
                           python3, no scapy.
  scapy_pfcp.py dump       reads "<name> <hex>" lines on stdin (messages
                           tep-pfcp emitted) and prints what scapy makes of
                           them, one line per IE:
                             <name> msg type=<t> seq=<n> [seid=<s>] S=<s>
                             <name> <path of IE classes> f1=v1 f2=v2 ...
                           where the path joins the classes of the enclosing
                           grouped IEs with "/"; tests/scapy.rs checks them.
"""
import sys
from pathlib import Path


def load_scapy():
    """scapy's names, imported only by the modes that need them."""
    import scapy.contrib.pfcp as pfcp
    from scapy.fields import ConditionalField
    from scapy.packet import Raw
    g = globals()
    g.update({k: getattr(pfcp, k) for k in dir(pfcp) if not k.startswith("_")})
    g["ConditionalField"] = ConditionalField
    g["Raw"] = Raw


V4 = "198.51.100.1"
SMF = "192.0.2.10"
GNB = "203.0.113.5"
GNB2 = "203.0.113.6"
UE4 = "10.45.0.7"
UE6 = "2001:db8:45::"


def hdr(seq, seid=None):
    if seid is None:
        return PFCP(version=1, S=0, seq=seq)
    return PFCP(version=1, S=1, seid=seid, seq=seq)


def create_pdr_ul():
    return IE_CreatePDR(IE_list=[
        IE_PDR_Id(id=1),
        IE_Precedence(precedence=200),
        IE_PDI(IE_list=[
            IE_SourceInterface(interface="Access"),
            IE_FTEID(CH=1, CHID=1, V4=1, choose_id=1),
            IE_NetworkInstance(instance="internet"),
            IE_QFI(QFI=9),
        ]),
        IE_OuterHeaderRemoval(header="GTP-U/UDP/IPv4"),
        IE_FAR_Id(id=1),
        IE_URR_Id(id=1),
        IE_QER_Id(id=1),
    ])


def create_pdr_dl():
    return IE_CreatePDR(IE_list=[
        IE_PDR_Id(id=2),
        IE_Precedence(precedence=200),
        IE_PDI(IE_list=[
            IE_SourceInterface(interface="SGi-LAN/N6-LAN"),
            IE_UE_IP_Address(SD=1, V4=1, ipv4=UE4),
        ]),
        IE_FAR_Id(id=2),
        IE_URR_Id(id=1),
        IE_QER_Id(id=1),
    ])


def vectors():
    yield "heartbeat_request", hdr(1) / PFCPHeartbeatRequest(IE_list=[
        IE_RecoveryTimeStamp(timestamp=3950000000),
        # A vendor IE: skipped.
        IE_EnterpriseSpecific(ietype=32770, enterprise_id=18681, data=b"\x01\x02"),
    ])
    yield "heartbeat_response", hdr(1) / PFCPHeartbeatResponse(IE_list=[
        IE_RecoveryTimeStamp(timestamp=3900000000),
    ])
    yield "association_setup_request", hdr(2) / PFCPAssociationSetupRequest(IE_list=[
        IE_NodeId(id_type="FQDN", id="smf.test"),
        IE_RecoveryTimeStamp(timestamp=3900000000),
        # An IE tep does not know (CP Function Features): skipped.
        IE_CPFunctionFeatures(),
    ])
    yield "association_setup_response", hdr(2) / PFCPAssociationSetupResponse(IE_list=[
        IE_NodeId(id_type="IPv4", ipv4=V4),
        IE_Cause(cause=1),
        IE_RecoveryTimeStamp(timestamp=3950000000),
        IE_UPFunctionFeatures(FTUP=1, EMPU=1, TREU=0, HEEU=0, PFDM=0, TRST=0, DLBD=0,
                              DDND=0, BUCP=0, spare=0, PFDE=0, FRRT=0, TRACE=0,
                              QUOAC=0, UDBC=0, PDIU=0),
    ])
    yield "association_update_request", hdr(3) / PFCPAssociationUpdateRequest(IE_list=[
        IE_NodeId(id_type="IPv4", ipv4=SMF),
    ])
    yield "association_release_request", hdr(4) / PFCPAssociationReleaseRequest(IE_list=[
        IE_NodeId(id_type="IPv6", ipv6="2001:db8::10"),
    ])
    yield "association_release_response", hdr(4) / PFCPAssociationReleaseResponse(IE_list=[
        IE_NodeId(id_type="IPv4", ipv4=V4),
        IE_Cause(cause=1),
    ])
    yield "session_establishment_request", hdr(5, 0) / PFCPSessionEstablishmentRequest(IE_list=[
        IE_NodeId(id_type="IPv4", ipv4=SMF),
        IE_FSEID(v4=1, seid=7000, ipv4=SMF),
        create_pdr_ul(),
        create_pdr_dl(),
        IE_CreateFAR(IE_list=[
            IE_FAR_Id(id=1),
            IE_ApplyAction(FORW=1),
            IE_ForwardingParameters(IE_list=[
                IE_DestinationInterface(interface="Core"),
                IE_NetworkInstance(instance="internet"),
            ]),
        ]),
        IE_CreateFAR(IE_list=[
            IE_FAR_Id(id=2),
            IE_ApplyAction(FORW=1),
            IE_ForwardingParameters(IE_list=[
                IE_DestinationInterface(interface="Access"),
                IE_OuterHeaderCreation(GTPUUDPIPV4=1, TEID=0x100, ipv4=GNB),
            ]),
        ]),
        IE_CreateURR(IE_list=[
            IE_URR_Id(id=1),
            IE_MeasurementMethod(VOLUM=1),
            IE_ReportingTriggers(volume_threshold=1),
            IE_VolumeThreshold(TOVOL=1, total=1000000),
        ]),
        IE_CreateQER(IE_list=[
            IE_QER_Id(id=1),
            IE_GateStatus(ul="OPEN", dl="CLOSED"),
            IE_QFI(QFI=9),
        ]),
        IE_PDNType(pdn_type="IPv4"),
    ])
    yield "session_establishment_request_v6", hdr(6, 0) / PFCPSessionEstablishmentRequest(IE_list=[
        IE_NodeId(id_type="IPv4", ipv4=SMF),
        IE_FSEID(v6=1, seid=7001, ipv6="2001:db8::10"),
        IE_CreatePDR(IE_list=[
            IE_PDR_Id(id=1),
            IE_Precedence(precedence=10),
            IE_PDI(IE_list=[
                IE_SourceInterface(interface="Access"),
                IE_FTEID(TEID=0x1234, V6=1, ipv6="2001:db8::1"),
            ]),
            IE_FAR_Id(id=1),
        ]),
        IE_CreatePDR(IE_list=[
            IE_PDR_Id(id=2),
            IE_Precedence(precedence=10),
            IE_PDI(IE_list=[
                IE_SourceInterface(interface="Core"),
                IE_UE_IP_Address(SD=1, V6=1, ipv6=UE6),
            ]),
            IE_FAR_Id(id=2),
        ]),
        IE_CreateFAR(IE_list=[
            IE_FAR_Id(id=1),
            IE_ApplyAction(DROP=1),
        ]),
        IE_CreateFAR(IE_list=[
            IE_FAR_Id(id=2),
            IE_ApplyAction(BUFF=1, NOCP=1),
        ]),
    ])
    yield "session_establishment_response", hdr(5, 7000) / PFCPSessionEstablishmentResponse(IE_list=[
        IE_NodeId(id_type="IPv4", ipv4=V4),
        IE_Cause(cause=1),
        IE_FSEID(v4=1, seid=0x100000001, ipv4=V4),
        IE_CreatedPDR(IE_list=[
            IE_PDR_Id(id=1),
            IE_FTEID(V4=1, TEID=1, ipv4=V4),
        ]),
    ])
    yield "session_establishment_rejected", hdr(5, 0) / PFCPSessionEstablishmentResponse(IE_list=[
        IE_NodeId(id_type="IPv4", ipv4=V4),
        IE_Cause(cause=73),
        IE_FailedRuleId(type="PDR", pdr_id=2),
    ])
    yield "session_modification_request", hdr(7, 0x100000001) / PFCPSessionModificationRequest(IE_list=[
        IE_RemovePDR(IE_list=[IE_PDR_Id(id=3)]),
        IE_RemoveFAR(IE_list=[IE_FAR_Id(id=3)]),
        IE_RemoveURR(IE_list=[IE_URR_Id(id=3)]),
        IE_RemoveQER(IE_list=[IE_QER_Id(id=3)]),
        IE_UpdatePDR(IE_list=[
            IE_PDR_Id(id=1),
            IE_FAR_Id(id=4),
        ]),
        IE_UpdateFAR(IE_list=[
            IE_FAR_Id(id=2),
            IE_ApplyAction(FORW=1),
            IE_UpdateForwardingParameters(IE_list=[
                IE_DestinationInterface(interface="Access"),
                IE_OuterHeaderCreation(GTPUUDPIPV4=1, TEID=0x200, ipv4=GNB2),
                IE_PFCPSMReqFlags(SNDEM=1),
            ]),
        ]),
        IE_UpdateURR(IE_list=[
            IE_URR_Id(id=1),
            IE_VolumeThreshold(DLVOL=1, downlink=5000),
        ]),
        IE_UpdateQER(IE_list=[
            IE_QER_Id(id=1),
            IE_GateStatus(ul="OPEN", dl="OPEN"),
        ]),
        IE_QueryURR(IE_list=[IE_URR_Id(id=1)]),
    ])
    yield "session_modification_response", hdr(7, 7000) / PFCPSessionModificationResponse(IE_list=[
        IE_Cause(cause=1),
        IE_UsageReport_SMR(IE_list=[
            IE_URR_Id(id=1),
            IE_UR_SEQN(number=0),
            IE_UsageReportTrigger(IMMER=1),
            IE_VolumeMeasurement(TOVOL=1, ULVOL=1, DLVOL=1, total=4000, uplink=1000, downlink=3000),
        ]),
    ])
    yield "session_deletion_request", hdr(8, 0x100000001) / PFCPSessionDeletionRequest()
    yield "session_deletion_response", hdr(8, 7000) / PFCPSessionDeletionResponse(IE_list=[
        IE_Cause(cause=1),
        IE_UsageReport_SDR(IE_list=[
            IE_URR_Id(id=1),
            IE_UR_SEQN(number=1),
            IE_UsageReportTrigger(TERMR=1),
            IE_VolumeMeasurement(TOVOL=1, total=5),
        ]),
    ])
    yield "session_not_found", hdr(8, 0) / PFCPSessionDeletionResponse(IE_list=[
        IE_Cause(cause=65),
    ])
    yield "mandatory_ie_missing", hdr(5, 0) / PFCPSessionEstablishmentResponse(IE_list=[
        IE_NodeId(id_type="IPv4", ipv4=V4),
        IE_Cause(cause=66),
        IE_OffendingIE(type=57),
    ])
    yield "session_report_request", hdr(9, 7000) / PFCPSessionReportRequest(IE_list=[
        IE_ReportType(DLDR=1),
        IE_DownlinkDataReport(IE_list=[IE_PDR_Id(id=2)]),
    ])
    yield "session_report_response", hdr(9, 0x100000001) / PFCPSessionReportResponse(IE_list=[
        IE_Cause(cause=1),
    ])


def seeds():
    here = Path(__file__).parent
    out = here / ".." / ".." / ".." / "fuzz" / "seeds" / "pfcp"
    out.mkdir(parents=True, exist_ok=True)
    msgs = {}
    for line in (here / "vectors" / "scapy.hex").read_text().splitlines():
        if line and not line.startswith("#"):
            name, h = line.split()
            msgs[name] = bytes.fromhex(h)
    for name, b in msgs.items():
        (out / name).write_bytes(b)
    hb = bytearray(msgs["heartbeat_response"])
    hb[0] |= 0x04  # FO: a second message follows
    (out / "bundled").write_bytes(bytes(hb) + msgs["session_deletion_request"])


def generate():
    load_scapy()
    out = Path(__file__).parent / "vectors" / "scapy.hex"
    lines = [f"{name} {bytes(p).hex()}" for name, p in vectors()]
    out.write_text("# PFCP messages built by scapy.contrib.pfcp (tests/scapy_pfcp.py generate)\n"
                   + "\n".join(lines) + "\n")


def fields(ie):
    out = []
    for f in ie.fields_desc:
        if f.name in ("ietype", "length", "IE_list"):
            continue
        if isinstance(f, ConditionalField) and not f._evalcond(ie):
            continue
        v = ie.getfieldval(f.name)
        if v is None:
            continue
        if isinstance(v, bytes):
            v = v.hex() if f.name == "extra_data" or f.name == "data" else v.decode("latin-1")
        out.append(f"{f.name}={v}")
    return " ".join(out)


def walk(name, ies, path):
    for ie in ies or []:
        p = f"{path}/{type(ie).__name__}" if path else type(ie).__name__
        print(f"{name} {p} {fields(ie)}".rstrip())
        if hasattr(ie, "IE_list"):
            walk(name, ie.IE_list, p)


def dump():
    load_scapy()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        name, h = line.split()
        p = PFCP(bytes.fromhex(h))
        seid = f" seid={p.seid}" if p.S == 1 else ""
        print(f"{name} msg type={p.message_type} seq={p.seq}{seid} S={p.S} len={p.length}")
        body = p.payload
        if isinstance(body, Raw) or body is None:
            print(f"{name} raw {bytes(body).hex()}")
            continue
        walk(name, getattr(body, "IE_list", []), "")


if __name__ == "__main__":
    {"generate": generate, "dump": dump, "seeds": seeds}[sys.argv[1]]()
