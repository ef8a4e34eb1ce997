"""PFCP through pycrate (PyPI `pycrate`, pycrate_mobile/TS29244_PFCP.py), a
second implementation beside scapy that tep-pfcp is checked against
(tests/pycrate.rs runs this script).

  pycrate_pfcp.py encode   prints the requests an SMF sends, built by
                           pycrate, one per line: "<name> <hex>".
  pycrate_pfcp.py decode   reads "<name> <hex>" lines on stdin (messages tep
                           sent) and prints what pycrate makes of them, one
                           line per field:
                             <name> <path>=<value>
                           where the path joins the enclosing IEs' names
                           with "/" (the header's fields under "Hdr"), and
                           lines starting with "!" for what pycrate found
                           wrong:
                             <name> !error=<parse_PFCP's code, 0: none>
                             <name> !reencoded=<same|differs>
                             <name> !unexpected=<IE path>:<types>
                             <name> !missing=<IE path>:<types>
                             <name> !raw=<IE path>
                           (an IE the message or grouped IE does not list,
                           a mandatory one absent: pycrate's chk_comp; an
                           IE pycrate knows but could not decode, left raw).

Which interpreter has pycrate is tests/pycrate.rs's business; the script
only needs pycrate importable.
"""
import sys

from pycrate_core.base import Buf
from pycrate_core.elt import Alt, Atom
from pycrate_ether.IP import IPAddr
from pycrate_mobile import TS29244_PFCP as P

SMF = "192.0.2.10"
GNB = "203.0.113.5"
GNB2 = "203.0.113.6"
UE4 = "10.45.0.7"
INTERNET = b"\x08internet"


def ie(name, data):
    return {"Type": P.PFCPIEType[name].value, "Data": data}


def msg(cls, seq, seid, ies):
    m = cls()
    hdr = {"SeqNum": seq}
    if seid is not None:
        hdr["SEID"] = seid
    m["Hdr"].set_val(hdr)
    m[1].set_val(ies)
    return m


def pdr_ul():
    return ie("CreatePDR", [
        ie("PDRID", {"Val": 1}),
        ie("Precedence", {"Val": 200}),
        ie("PDI", [
            ie("SourceInterface", {"If": 0}),
            ie("FTEID", {"CHID": 1, "CH": 1, "V4": 1, "CHOOSE_ID": 1}),
            ie("NetworkInstance", INTERNET),
            ie("UEIPAddress", {"V4": 1, "IPv4Addr": UE4}),
            ie("QFI", {"QFI": 9}),
        ]),
        ie("OuterHeaderRemoval", {"Desc": 0}),
        ie("FARID", {"Val": 1}),
        ie("URRID", {"Val": 1}),
        ie("QERID", {"Val": 1}),
    ])


def pdr_dl():
    return ie("CreatePDR", [
        ie("PDRID", {"Val": 2}),
        ie("Precedence", {"Val": 200}),
        ie("PDI", [
            ie("SourceInterface", {"If": 1}),
            ie("NetworkInstance", INTERNET),
            ie("UEIPAddress", {"SD": 1, "V4": 1, "IPv4Addr": UE4}),
        ]),
        ie("FARID", {"Val": 2}),
        ie("URRID", {"Val": 1}),
        ie("QERID", {"Val": 1}),
    ])


def fars():
    return [
        ie("CreateFAR", [
            ie("FARID", {"Val": 1}),
            ie("ApplyAction", {"Octet1": {"FORW": 1}}),
            ie("ForwardingParameters", [
                ie("DestinationInterface", {"Val": 1}),
                ie("NetworkInstance", INTERNET),
            ]),
        ]),
        ie("CreateFAR", [
            ie("FARID", {"Val": 2}),
            ie("ApplyAction", {"Octet1": {"FORW": 1}}),
            ie("ForwardingParameters", [
                ie("DestinationInterface", {"Val": 0}),
                ie("OuterHeaderCreation",
                   {"GTPU_UDP_IPv4": 1, "TEID": 0x100, "IPv4Addr": GNB}),
                # DSCP 46 (EF) under the mask TS 29.212 gives.
                ie("TransportLevelMarking", {"ToSTrafficClass": b"\xb8\xfc"}),
            ]),
            ie("BARID", {"Val": 1}),
        ]),
    ]


def requests():
    est = [
        ie("NodeID", {"Type": 0, "Val": SMF}),
        ie("FSEID", {"V4": 1, "SEID": 7000, "IPv4Addr": SMF}),
        pdr_ul(),
        pdr_dl(),
        *fars(),
        # Every usage trigger tep applies, with its IEs.
        ie("CreateURR", [
            ie("URRID", {"Val": 1}),
            ie("MeasurementMethod", {"VOLUM": 1, "DURAT": 1}),
            ie("ReportingTriggers", {
                "Octet1": {"VOLTH": 1, "PERIO": 1, "TIMTH": 1, "START": 1, "STOPT": 1},
                "Octet2": {"VOLQU": 1, "TIMQU": 1},
            }),
            ie("MeasurementPeriod", {"Val": 3600}),
            ie("VolumeThreshold", {"TOVOL": 1, "Total": 1000000}),
            ie("VolumeQuota", {"ULVOL": 1, "Uplink": 1 << 40}),
            ie("TimeThreshold", {"Val": 7200}),
            ie("TimeQuota", {"Val": 86400}),
            ie("InactivityDetectionTime", {"Val": 30}),
        ]),
        ie("CreateQER", [
            ie("QERID", {"Val": 1}),
            ie("GateStatus", {"ULGate": 0, "DLGate": 0}),
            ie("GBR", {"UL": 64, "DL": 128}),
            ie("QFI", {"QFI": 9}),
        ]),
        # FAR 2's buffering: the report 100 ms after the first packet, 4
        # packets held.
        ie("CreateBAR", [
            ie("BARID", {"Val": 1}),
            ie("DownlinkDataNotificationDelay", {"Val": 2}),
            ie("SuggestedBufferingPacketsCount", {"Val": 4}),
        ]),
    ]
    # The gNB moved (handover): FAR 2 to its new TEID and address, the
    # threshold lowered, the usage so far asked for.
    handover = [
        ie("UpdateFAR", [
            ie("FARID", {"Val": 2}),
            ie("ApplyAction", {"Octet1": {"FORW": 1}}),
            ie("UpdateForwardingParameters", [
                ie("DestinationInterface", {"Val": 0}),
                ie("OuterHeaderCreation",
                   {"GTPU_UDP_IPv4": 1, "TEID": 0x200, "IPv4Addr": GNB2}),
            ]),
        ]),
        ie("UpdateURR", [
            ie("URRID", {"Val": 1}),
            ie("VolumeThreshold", {"DLVOL": 1, "Downlink": 5000}),
        ]),
        ie("UpdateQER", [
            ie("QERID", {"Val": 1}),
            ie("GateStatus", {"ULGate": 0, "DLGate": 0}),
        ]),
        # Whatever is held is dropped, not sent to the new gNB.
        ie("PFCPSMReqFlags", {"DROBU": 1}),
        ie("QueryURR", [ie("URRID", {"Val": 1})]),
    ]
    # The UE went idle (N2 release): downlink buffered, the SMF notified.
    idle = [
        ie("UpdateFAR", [
            ie("FARID", {"Val": 2}),
            ie("ApplyAction", {"Octet1": {"BUFF": 1, "NOCP": 1}}),
        ]),
        ie("UpdateBARSessionModReq", [
            ie("BARID", {"Val": 1}),
            ie("SuggestedBufferingPacketsCount", {"Val": 3}),
        ]),
    ]
    return [
        ("heartbeat_request",
         msg(P.PFCPHeartbeatReq, 1, None,
             [ie("RecoveryTimeStamp", {"Val": 3950000000})])),
        ("association_setup_request",
         msg(P.PFCPAssociationSetupReq, 2, None, [
             ie("NodeID", {"Type": 2, "Val": "smf.pycrate.test"}),
             ie("RecoveryTimeStamp", {"Val": 3900000000}),
         ])),
        ("association_update_request",
         msg(P.PFCPAssociationUpdateReq, 3, None,
             [ie("NodeID", {"Type": 2, "Val": "smf.pycrate.test"})])),
        ("session_establishment_request",
         msg(P.PFCPSessionEstablishmentReq, 4, 0, est)),
        ("session_modification_request",
         msg(P.PFCPSessionModificationReq, 5, 0, handover)),
        ("session_modification_idle",
         msg(P.PFCPSessionModificationReq, 6, 0, idle)),
        ("session_deletion_request",
         msg(P.PFCPSessionDeletionReq, 7, 0, [])),
        # tests/pycrate.rs puts the SEID and sequence number of the
        # report it answers.
        ("session_report_response",
         msg(P.PFCPSessionReportResp, 0, 0,
             [ie("Cause", 1), ie("PFCPSRRspFlags", {"DROBU": 1})])),
        ("association_release_request",
         msg(P.PFCPAssociationReleaseReq, 8, None,
             [ie("NodeID", {"Type": 2, "Val": "smf.pycrate.test"})])),
    ]


def encode():
    for name, m in requests():
        print(name, m.to_bytes().hex())


def value(e):
    if isinstance(e, IPAddr):
        return e.decode()
    if isinstance(e, P.FQDN):
        return e.decode()
    v = e.get_val()
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    return str(v)


def walk(e, path, out):
    """Appends (path, value) for every leaf field of `e` that is on the
    wire; an IE adds its name to the path, its Type/Len/EID are left out."""
    if e.get_trans():
        return
    if isinstance(e, P.PFCPIE):
        sub = path + [e._name]
        out.append(("/".join(sub), None))
        t = e["Type"].get_val()
        if type(e["Data"]) is Buf and P.PFCPIELUT.get(t, Buf) is not Buf:
            # pycrate has a class for the IE but fell back to its raw
            # octets: the class did not decode them.
            out.append(("!raw", "/".join(sub)))
        walk(e["Data"], sub, out)
        return
    if isinstance(e, P.FQDN) or isinstance(e, Atom):
        out.append(("/".join(path + [e._name]), value(e)))
        return
    if isinstance(e, Alt):
        walk(e.get_alt(), path, out)
        return
    if isinstance(e, P.PFCPHdr):
        path = path + ["Hdr"]
    for c in e:
        walk(c, path, out)


def compliance(ies, path, name):
    """pycrate's check of each (grouped) IE list against the IEs TS 29.244
    lists for it."""
    missing, unexpected = ies.chk_comp()
    # chk_comp counts a mandatory IE once: a second Create PDR or Create
    # FAR, which the message allows, would read as unexpected.
    unexpected -= set(ies.MAND)
    where = "/".join(path) or "message"
    if missing:
        print(f"{name} !missing={where}:{sorted(missing)}")
    if unexpected:
        print(f"{name} !unexpected={where}:{sorted(unexpected)}")
    for e in ies:
        if isinstance(e, P.PFCPIE) and isinstance(e["Data"], P.PFCPIEs):
            compliance(e["Data"], path + [e._name], name)


def fix_pycrate():
    """pycrate 0.8.1's Usage Report in a Session Report Request (type 80)
    lists the Downlink Data Report's optional IEs as its mandatory ones,
    so it fails to decode any real report and leaves it raw. TS 29.244
    Table 7.5.8.3-1 makes URR ID, UR-SEQN and Usage Report Trigger
    mandatory, as for the other two Usage Reports (Tables 7.5.5.2-1,
    7.5.7.2-1)."""
    srr = P.UsageReportSessionReportReq
    if P.PFCPIEType.URRID.value not in srr.MAND:
        srr.MAND = P.UsageReportSessionModResp.MAND


def decode():
    fix_pycrate()
    for line in sys.stdin:
        if not line.strip():
            continue
        name, hexa = line.split()
        buf = bytes.fromhex(hexa)
        m, err = P.parse_PFCP(buf)
        print(f"{name} !error={err}")
        if m is None:
            continue
        same = m.to_bytes() == buf
        print(f"{name} !reencoded={'same' if same else 'differs'}")
        compliance(m[1], [], name)
        out = []
        walk(m, [], out)
        for p, v in out:
            print(f"{name} {p}" if v is None else f"{name} {p}={v}")


if __name__ == "__main__":
    {"encode": encode, "decode": decode}[sys.argv[1]]()
