//! The leaf IEs tep reads or writes (TS 29.244 §8.2), each a plain value
//! with [`Value`] parse and emit. Flags octets are named after the spec's
//! bit names; "octet 5" is the first octet of the value.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub use crate::cause::Cause;
use crate::ie::{IeError, IeType, Reader, Value, Writer};

impl Value for Cause {
    const TYPE: IeType = IeType::CAUSE;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        match r.u8()? {
            // 0: "shall be treated as an invalid IE".
            0 => Err(r.incorrect()),
            v => Ok(Cause(v)),
        }
    }
    fn emit(&self, w: &mut Writer<'_>) {
        w.u8(self.0);
    }
}

/// Declares IEs whose value is one big-endian integer (the rule IDs and
/// the like): a newtype, its parse and emit.
macro_rules! int_ie {
    ($($(#[$m:meta])* $name:ident($t:ty) = $ty:ident, $rw:ident;)+) => {$(
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub $t);

        impl Value for $name {
            const TYPE: IeType = IeType::$ty;
            fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
                r.$rw().map($name)
            }
            fn emit(&self, w: &mut Writer<'_>) {
                w.$rw(self.0);
            }
        }
    )+};
}

int_ie! {
    /// PDR ID (§8.2.36): the rule ID, 2 octets.
    PdrId(u16) = PDR_ID, u16;
    /// FAR ID (§8.2.74).
    FarId(u32) = FAR_ID, u32;
    /// QER ID (§8.2.75).
    QerId(u32) = QER_ID, u32;
    /// URR ID (§8.2.54).
    UrrId(u32) = URR_ID, u32;
    /// Precedence (§8.2.11): lower values match first.
    Precedence(u32) = PRECEDENCE, u32;
    /// Recovery Time Stamp (§8.2.65): the sender's start, seconds since
    /// 1900 (NTP era 0).
    RecoveryTimeStamp(u32) = RECOVERY_TIME_STAMP, u32;
    /// UR-SEQN (§8.2.77): the usage report's sequence number per URR.
    UrSeqn(u32) = UR_SEQN, u32;
    /// BAR ID (§8.2.88).
    BarId(u8) = BAR_ID, u8;
    /// Downlink Data Notification Delay (§8.2.28): how long after the
    /// first downlink packet is buffered the Downlink Data Report goes,
    /// in units of 50 ms.
    DownlinkDataNotificationDelay(u8) = DOWNLINK_DATA_NOTIFICATION_DELAY, u8;
    /// Suggested Buffering Packets Count (§8.2.91): how many downlink
    /// packets the UP function should hold for the session.
    SuggestedBufferingPacketsCount(u8) = SUGGESTED_BUFFERING_PACKETS_COUNT, u8;
    /// Start Time (§8.2.79): when a usage report's measurement began,
    /// seconds since 1900 (NTP era 0).
    StartTime(u32) = START_TIME, u32;
    /// End Time (§8.2.80): when it ended, in the same form.
    EndTime(u32) = END_TIME, u32;
    /// Time Threshold (§8.2.14): seconds of measured duration that call
    /// for a usage report.
    TimeThreshold(u32) = TIME_THRESHOLD, u32;
    /// Time Quota (§8.2.51): seconds of measured duration allowed.
    TimeQuota(u32) = TIME_QUOTA, u32;
    /// Measurement Period (§8.2.42): seconds between periodic usage
    /// reports.
    MeasurementPeriod(u32) = MEASUREMENT_PERIOD, u32;
    /// Inactivity Detection Time (§8.2.18): seconds without a packet
    /// after which the duration stops being measured (and traffic is
    /// deemed stopped).
    InactivityDetectionTime(u32) = INACTIVITY_DETECTION_TIME, u32;
    /// Duration Measurement (§8.2.45): seconds measured.
    DurationMeasurement(u32) = DURATION_MEASUREMENT, u32;
}

/// Offending IE (§8.2.22): the type of the IE at fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct OffendingIe(pub IeType);

impl Value for OffendingIe {
    const TYPE: IeType = IeType::OFFENDING_IE;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        r.u16().map(|t| OffendingIe(IeType(t)))
    }
    fn emit(&self, w: &mut Writer<'_>) {
        w.u16(self.0 .0);
    }
}

/// Declares IEs whose value is one flags octet, masked to its defined
/// bits.
macro_rules! u8_ie {
    ($($(#[$m:meta])* $name:ident = $ty:ident, $mask:expr;)+) => {$(
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub u8);

        impl Value for $name {
            const TYPE: IeType = IeType::$ty;
            fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
                r.u8().map(|v| $name(v & $mask))
            }
            fn emit(&self, w: &mut Writer<'_>) {
                w.u8(self.0 & $mask);
            }
        }
    )+};
}

u8_ie! {
    /// QFI (§8.2.89): the QoS flow identifier, 6 bits.
    Qfi = QFI, 0x3f;
    /// Report Type (§8.2.21): [`ReportType::DLDR`], [`ReportType::USAR`], …
    ReportType = REPORT_TYPE, 0x7f;
    /// Measurement Method (§8.2.40): DURAT, VOLUM, EVENT.
    MeasurementMethod = MEASUREMENT_METHOD, 0x07;
    /// PFCPSMReq-Flags (§8.2.31): DROBU, SNDEM, QUARR.
    PfcpsmReqFlags = PFCPSMREQ_FLAGS, 0x07;
    /// PFCPSRRsp-Flags (§8.2.32): DROBU.
    PfcpsrRspFlags = PFCPSRRSP_FLAGS, 0x01;
}

impl ReportType {
    /// Downlink Data Report.
    pub const DLDR: u8 = 0x01;
    /// Usage Report.
    pub const USAR: u8 = 0x02;
    /// Error Indication Report.
    pub const ERIR: u8 = 0x04;
    /// User Plane Inactivity Report.
    pub const UPIR: u8 = 0x08;
}

impl MeasurementMethod {
    pub const DURAT: u8 = 0x01;
    pub const VOLUM: u8 = 0x02;
    pub const EVENT: u8 = 0x04;
}

impl PfcpsrRspFlags {
    /// Drop buffered packets.
    pub const DROBU: u8 = 0x01;
}

impl PfcpsmReqFlags {
    /// Drop buffered packets.
    pub const DROBU: u8 = 0x01;
    /// Send End Marker packets to the old peer.
    pub const SNDEM: u8 = 0x02;
    /// Query all URRs.
    pub const QUARR: u8 = 0x04;
}

/// An interface value (Source Interface §8.2.2, Destination Interface
/// §8.2.24): 4 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Interface(pub u8);

impl Interface {
    /// Access: N3, towards the RAN.
    pub const ACCESS: Interface = Interface(0);
    /// Core: N9, towards another UPF.
    pub const CORE: Interface = Interface(1);
    /// SGi-LAN / N6-LAN: towards the data network.
    pub const N6_LAN: Interface = Interface(2);
    /// CP-function.
    pub const CP_FUNCTION: Interface = Interface(3);
    /// LI function (destination only).
    pub const LI_FUNCTION: Interface = Interface(4);
}

/// Source Interface (§8.2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct SourceInterface(pub Interface);

/// Destination Interface (§8.2.24).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct DestinationInterface(pub Interface);

impl Value for SourceInterface {
    const TYPE: IeType = IeType::SOURCE_INTERFACE;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        match r.u8()? & 0x0f {
            v @ 0..=3 => Ok(SourceInterface(Interface(v))),
            _ => Err(r.incorrect()),
        }
    }
    fn emit(&self, w: &mut Writer<'_>) {
        w.u8(self.0 .0 & 0x0f);
    }
}

impl Value for DestinationInterface {
    const TYPE: IeType = IeType::DESTINATION_INTERFACE;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        match r.u8()? & 0x0f {
            v @ 0..=4 => Ok(DestinationInterface(Interface(v))),
            _ => Err(r.incorrect()),
        }
    }
    fn emit(&self, w: &mut Writer<'_>) {
        w.u8(self.0 .0 & 0x0f);
    }
}

/// Gate Status (§8.2.7): UL and DL gates, 0 open, anything else closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct GateStatus {
    pub ul: u8,
    pub dl: u8,
}

impl GateStatus {
    pub const OPEN: u8 = 0;
    pub const CLOSED: u8 = 1;

    /// Both gates open.
    pub const fn open() -> Self {
        GateStatus { ul: 0, dl: 0 }
    }
}

impl Value for GateStatus {
    const TYPE: IeType = IeType::GATE_STATUS;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        let v = r.u8()?;
        Ok(GateStatus {
            ul: (v >> 2) & 3,
            dl: v & 3,
        })
    }
    fn emit(&self, w: &mut Writer<'_>) {
        w.u8((self.ul & 3) << 2 | (self.dl & 3));
    }
}

/// MBR (§8.2.8): the maximum bit rate each way, in kbit/s (1000 bit/s),
/// 40 bits each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Mbr {
    /// UL MBR, kbit/s.
    pub ul: u64,
    /// DL MBR, kbit/s.
    pub dl: u64,
}

impl Mbr {
    /// The largest rate the 40-bit fields hold.
    pub const MAX: u64 = (1 << 40) - 1;
}

fn u40(r: &mut Reader<'_>) -> Result<u64, IeError> {
    let hi = u64::from(r.u8()?);
    Ok(hi << 32 | u64::from(r.u32()?))
}

impl Value for Mbr {
    const TYPE: IeType = IeType::MBR;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        Ok(Mbr {
            ul: u40(r)?,
            dl: u40(r)?,
        })
    }
    fn emit(&self, w: &mut Writer<'_>) {
        for v in [self.ul, self.dl] {
            let v = v.min(Mbr::MAX);
            w.u8((v >> 32) as u8);
            w.u32(v as u32);
        }
    }
}

/// GBR (§8.2.9): the guaranteed bit rate each way, encoded as the MBR
/// (kbit/s, 40 bits each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Gbr {
    /// UL GBR, kbit/s.
    pub ul: u64,
    /// DL GBR, kbit/s.
    pub dl: u64,
}

impl Value for Gbr {
    const TYPE: IeType = IeType::GBR;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        let m = Mbr::parse(r)?;
        Ok(Gbr { ul: m.ul, dl: m.dl })
    }
    fn emit(&self, w: &mut Writer<'_>) {
        Mbr {
            ul: self.ul,
            dl: self.dl,
        }
        .emit(w)
    }
}

/// Transport Level Marking (§8.2.12): the ToS (IPv4) or Traffic Class
/// (IPv6) of the outer header of the packets a FAR sends, and its mask
/// (TS 29.212 §5.3.15: "0xFC", the DSCP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TransportLevelMarking {
    /// The ToS / Traffic Class value.
    pub tos: u8,
    /// Its mask.
    pub mask: u8,
}

impl Value for TransportLevelMarking {
    const TYPE: IeType = IeType::TRANSPORT_LEVEL_MARKING;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        Ok(TransportLevelMarking {
            tos: r.u8()?,
            mask: r.u8()?,
        })
    }
    fn emit(&self, w: &mut Writer<'_>) {
        w.u8(self.tos);
        w.u8(self.mask);
    }
}

/// Network Instance (§8.2.4): an opaque name (often DNS-label encoded),
/// kept as sent.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct NetworkInstance(pub Vec<u8>);

impl Value for NetworkInstance {
    const TYPE: IeType = IeType::NETWORK_INSTANCE;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        Ok(NetworkInstance(r.rest().to_vec()))
    }
    fn emit(&self, w: &mut Writer<'_>) {
        w.bytes(&self.0);
    }
}

/// The most octets of a [`NetworkName`]: a DNN is at most 100 octets
/// encoded (TS 23.003 §9.1), 99 as dotted text.
pub const MAX_NETWORK_NAME: usize = 99;

/// A Network Instance as tep compares it with the data networks it is
/// configured with. §8.2.4 leaves the encoding to the operator: SMFs send
/// a DNN either DNS-label encoded (`\x08internet`, TS 23.003 §9.1, as
/// free5GC and open5gs do) or as plain text (`internet`). Octets that
/// parse whole as labels (each 1 to 63 letters, digits or '-') are that
/// DNN with its labels joined by dots; any others are the text itself.
/// Compared without ASCII case, as DNNs are. Fixed size, so that a FAR
/// stays `Copy`; a name longer than any configured one can be matches none.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NetworkName {
    len: u8,
    text: [u8; MAX_NETWORK_NAME],
}

impl NetworkName {
    /// The octets of a Network Instance IE, read as above.
    pub fn of(octets: &[u8]) -> NetworkName {
        let mut n = NetworkName {
            len: 0,
            text: [0; MAX_NETWORK_NAME],
        };
        if !n.labels(octets) {
            n.len = 0;
            if octets.len() > MAX_NETWORK_NAME {
                n.len = u8::MAX;
            } else {
                n.text[..octets.len()].copy_from_slice(octets);
                n.text[..octets.len()].make_ascii_lowercase();
                n.len = octets.len() as u8;
            }
        }
        n
    }

    /// Fills `self` with the dotted form of `octets` if they are labels.
    fn labels(&mut self, octets: &[u8]) -> bool {
        let mut at = 0;
        let mut out = 0;
        while at < octets.len() {
            let l = usize::from(octets[at]);
            let Some(label) = octets.get(at + 1..at + 1 + l) else {
                return false;
            };
            let dot = usize::from(out > 0);
            if l == 0
                || l > 63
                || out + dot + l > MAX_NETWORK_NAME
                || !label
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
            {
                return false;
            }
            if dot == 1 {
                self.text[out] = b'.';
            }
            self.text[out + dot..out + dot + l].copy_from_slice(label);
            out += dot + l;
            at += 1 + l;
        }
        self.text[..out].make_ascii_lowercase();
        self.len = out as u8;
        out > 0
    }

    /// Whether this is the data network named `name` (lowercase, as the
    /// config keeps it).
    pub fn is(&self, name: &str) -> bool {
        self.len != u8::MAX && &self.text[..usize::from(self.len)] == name.as_bytes()
    }
}

impl core::fmt::Debug for NetworkName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.len == u8::MAX {
            return f.write_str("NetworkName(too long)");
        }
        let t = &self.text[..usize::from(self.len)];
        write!(f, "NetworkName({:?})", String::from_utf8_lossy(t))
    }
}

impl NetworkInstance {
    /// The name it gives ([`NetworkName`]).
    pub fn name(&self) -> NetworkName {
        NetworkName::of(&self.0)
    }
}

/// A bitmap IE of 1 to 8 octets (Apply Action, Reporting Triggers, Usage
/// Report Trigger, UP Function Features): octet 5 is bits 0..8, octet 6
/// bits 8..16, and so on. The octet count is kept so that a value emits
/// as it came (later releases add octets).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Bitmap {
    pub bits: u64,
    pub octets: u8,
}

impl Bitmap {
    /// `bits` sent in `octets` octets (1..=8).
    pub const fn new(bits: u64, octets: u8) -> Self {
        Bitmap { bits, octets }
    }

    pub const fn has(&self, bit: u64) -> bool {
        self.bits & bit != 0
    }

    fn parse(r: &mut Reader<'_>, min: usize) -> Result<Self, IeError> {
        let b = r.rest();
        if b.len() < min {
            return Err(r.incorrect());
        }
        let n = b.len().min(8);
        let mut bits = 0u64;
        for (i, &o) in b[..n].iter().enumerate() {
            bits |= (o as u64) << (8 * i);
        }
        Ok(Bitmap {
            bits,
            octets: n as u8,
        })
    }

    /// The first `max` octets: what a newer release adds beyond the
    /// octets tep knows is neither kept nor sent back.
    fn truncate(self, max: u8) -> Self {
        let mask = u64::MAX >> (64 - 8 * u32::from(max.clamp(1, 8)));
        Bitmap {
            bits: self.bits & mask,
            octets: self.octets.min(max),
        }
    }

    /// Writes `octets` octets, at least `min` (a default value has none).
    fn emit(&self, w: &mut Writer<'_>, min: u8) {
        for i in 0..self.octets.clamp(min, 8) {
            w.u8((self.bits >> (8 * i)) as u8);
        }
    }
}

/// Declares a bitmap IE: a [`Bitmap`] newtype, and its parse and emit:
/// at least `min` octets (shorter is incorrect; emitted as at least
/// `min`), the bits of the first `max` kept, and `valid` (if given)
/// checked on them.
macro_rules! bitmap_ie {
    ($(
        $(#[$m:meta])* $name:ident = $ty:ident, octets $min:literal..=$max:literal
        $(, valid $valid:expr)?;
    )+) => {$(
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub Bitmap);

        impl $name {
            /// Whether `bit` (one of the constants) is set.
            pub const fn has(&self, bit: u64) -> bool {
                self.0.has(bit)
            }
        }

        impl Value for $name {
            const TYPE: IeType = IeType::$ty;
            fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
                let b = Bitmap::parse(r, $min)?.truncate($max);
                $(if !$valid(b.bits) {
                    return Err(r.incorrect());
                })?
                Ok($name(b))
            }
            fn emit(&self, w: &mut Writer<'_>) {
                self.0.emit(w, $min);
            }
        }
    )+};
}

bitmap_ie! {
    /// Apply Action (§8.2.26), 1 or 2 octets (Rel-16 added the second).
    ApplyAction = APPLY_ACTION, octets 1..=2, valid ApplyAction::one_primary;
    /// Reporting Triggers (§8.2.19), 2 or 3 octets.
    ReportingTriggers = REPORTING_TRIGGERS, octets 2..=3;
    /// Usage Report Trigger (§8.2.41), 3 octets since Rel-15 (2 before).
    UsageReportTrigger = USAGE_REPORT_TRIGGER, octets 1..=3;
    /// UP Function Features (§8.2.25).
    UpFunctionFeatures = UP_FUNCTION_FEATURES, octets 1..=8;
}

impl ApplyAction {
    pub const DROP: u64 = 0x01;
    pub const FORW: u64 = 0x02;
    pub const BUFF: u64 = 0x04;
    pub const NOCP: u64 = 0x08;
    pub const DUPL: u64 = 0x10;
    pub const IPMA: u64 = 0x20;
    pub const IPMD: u64 = 0x40;
    pub const DFRT: u64 = 0x80;
    // Octet 6.
    pub const EDRT: u64 = 0x0100;
    pub const BDPN: u64 = 0x0200;
    pub const DDPN: u64 = 0x0400;

    /// `bits` in the 1-octet form (or 2 octets if a second-octet flag is
    /// set).
    pub const fn new(bits: u64) -> Self {
        ApplyAction(Bitmap::new(bits, if bits > 0xff { 2 } else { 1 }))
    }
}

impl ApplyAction {
    /// "One and only one of DROP, FORW, BUFF, IPMA and IPMD shall be set"
    /// (§8.2.26).
    const fn one_primary(bits: u64) -> bool {
        let primary = bits & (Self::DROP | Self::FORW | Self::BUFF | Self::IPMA | Self::IPMD);
        primary.count_ones() == 1
    }
}

impl ReportingTriggers {
    pub const PERIO: u64 = 0x01;
    pub const VOLTH: u64 = 0x02;
    pub const TIMTH: u64 = 0x04;
    pub const QUHTI: u64 = 0x08;
    pub const START: u64 = 0x10;
    pub const STOPT: u64 = 0x20;
    pub const DROTH: u64 = 0x40;
    pub const LIUSA: u64 = 0x80;
    pub const VOLQU: u64 = 0x0100;
    pub const TIMQU: u64 = 0x0200;
    pub const ENVCL: u64 = 0x0400;
}

impl UsageReportTrigger {
    pub const PERIO: u64 = 0x01;
    pub const VOLTH: u64 = 0x02;
    pub const TIMTH: u64 = 0x04;
    pub const QUHTI: u64 = 0x08;
    pub const START: u64 = 0x10;
    pub const STOPT: u64 = 0x20;
    pub const DROTH: u64 = 0x40;
    /// Immediate report (a Query URR).
    pub const IMMER: u64 = 0x80;
    pub const VOLQU: u64 = 0x0100;
    pub const TIMQU: u64 = 0x0200;
    pub const LIUSA: u64 = 0x0400;
    /// Termination report (the session or URR was removed).
    pub const TERMR: u64 = 0x0800;
    pub const MONIT: u64 = 0x1000;
    pub const ENVCL: u64 = 0x2000;

    /// `bits` in the 3-octet form of Rel-15 onwards.
    pub const fn new(bits: u64) -> Self {
        UsageReportTrigger(Bitmap::new(bits, 3))
    }
}

impl UpFunctionFeatures {
    /// Buffering by the CP function (tep buffers in the UP: never set).
    pub const BUCP: u64 = 0x01;
    pub const DDND: u64 = 0x02;
    pub const DLBD: u64 = 0x04;
    pub const TRST: u64 = 0x08;
    /// F-TEID allocation in the UP function (CHOOSE).
    pub const FTUP: u64 = 0x10;
    pub const PFDM: u64 = 0x20;
    pub const HEEU: u64 = 0x40;
    pub const TREU: u64 = 0x80;
    /// Sending of End Marker packets (SNDEM).
    pub const EMPU: u64 = 0x0100;
    pub const PDIU: u64 = 0x0200;
    pub const UDBC: u64 = 0x0400;
    pub const QUOAC: u64 = 0x0800;
    pub const TRACE: u64 = 0x1000;
    pub const FRRT: u64 = 0x2000;
    pub const PFDE: u64 = 0x4000;

    /// What tep's UP function supports, each bit checked against what it
    /// enforces: FTUP (it allocates F-TEIDs on CHOOSE), EMPU (it sends
    /// End Markers on SNDEM), DDND (a BAR's Downlink Data Notification
    /// Delay defers the Downlink Data Report) and UDBC (a BAR's Suggested
    /// Buffering Packets Count bounds the packets held), in the 2-octet
    /// form. Not BUCP (it buffers in the UP), DLBD (no DL Buffering
    /// Duration), TRST/PFDM/PFDE (no Application ID or traffic steering),
    /// HEEU, TREU, PDIU (no Traffic Endpoints), QUOAC (no FAR ID for
    /// Quota Action: a used-up quota drops), TRACE, FRRT; nor any later
    /// octet: not UEIP (UE addresses come from the SMF), BUNDL (one
    /// message per datagram), MNOP (no Measurement Information), …
    pub const TEP: UpFunctionFeatures = UpFunctionFeatures(Bitmap::new(
        Self::FTUP | Self::EMPU | Self::DDND | Self::UDBC,
        2,
    ));
}

/// Node ID (§8.2.38).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NodeId {
    V4(Ipv4Addr),
    V6(Ipv6Addr),
    /// An FQDN in DNS label encoding (length-prefixed labels), as sent.
    Fqdn(Vec<u8>),
}

impl Default for NodeId {
    fn default() -> Self {
        NodeId::V4(Ipv4Addr::UNSPECIFIED)
    }
}

impl NodeId {
    /// An FQDN node ID from dotted text (labels of 1..=63 octets).
    pub fn fqdn(name: &str) -> Option<NodeId> {
        let mut v = vec![];
        for label in name.split('.') {
            if label.is_empty() || label.len() > 63 {
                return None;
            }
            v.push(label.len() as u8);
            v.extend_from_slice(label.as_bytes());
        }
        Some(NodeId::Fqdn(v))
    }
}

impl From<IpAddr> for NodeId {
    fn from(a: IpAddr) -> Self {
        match a {
            IpAddr::V4(a) => NodeId::V4(a),
            IpAddr::V6(a) => NodeId::V6(a),
        }
    }
}

impl Value for NodeId {
    const TYPE: IeType = IeType::NODE_ID;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        match r.u8()? & 0x0f {
            0 => r.ipv4().map(NodeId::V4),
            1 => r.ipv6().map(NodeId::V6),
            2 => match r.rest() {
                [] => Err(r.incorrect()),
                name => Ok(NodeId::Fqdn(name.to_vec())),
            },
            _ => Err(r.incorrect()),
        }
    }
    fn emit(&self, w: &mut Writer<'_>) {
        match self {
            NodeId::V4(a) => {
                w.u8(0);
                w.ipv4(*a);
            }
            NodeId::V6(a) => {
                w.u8(1);
                w.ipv6(*a);
            }
            NodeId::Fqdn(n) => {
                w.u8(2);
                w.bytes(n);
            }
        }
    }
}

/// F-SEID (§8.2.37): an SEID and the address of the node that chose it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct FSeid {
    pub seid: u64,
    pub v4: Option<Ipv4Addr>,
    pub v6: Option<Ipv6Addr>,
}

impl FSeid {
    /// The address to send to: IPv4 if present, else IPv6.
    pub fn addr(&self) -> Option<IpAddr> {
        self.v4.map(IpAddr::V4).or_else(|| self.v6.map(IpAddr::V6))
    }
}

const F_V6: u8 = 0x01;
const F_V4: u8 = 0x02;

impl Value for FSeid {
    const TYPE: IeType = IeType::F_SEID;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        let flags = r.u8()?;
        let seid = r.u64()?;
        let v4 = if flags & F_V4 != 0 {
            Some(r.ipv4()?)
        } else {
            None
        };
        let v6 = if flags & F_V6 != 0 {
            Some(r.ipv6()?)
        } else {
            None
        };
        if v4.is_none() && v6.is_none() {
            return Err(r.incorrect());
        }
        Ok(FSeid { seid, v4, v6 })
    }
    fn emit(&self, w: &mut Writer<'_>) {
        w.u8(if self.v4.is_some() { F_V4 } else { 0 } | if self.v6.is_some() { F_V6 } else { 0 });
        w.u64(self.seid);
        if let Some(a) = self.v4 {
            w.ipv4(a);
        }
        if let Some(a) = self.v6 {
            w.ipv6(a);
        }
    }
}

/// F-TEID (§8.2.3): a TEID with its address(es), or a request that the UP
/// function choose one (CH), for IPv4 and/or IPv6, shared between the PDRs
/// that name the same CHOOSE ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FTeid {
    Assigned {
        teid: u32,
        v4: Option<Ipv4Addr>,
        v6: Option<Ipv6Addr>,
    },
    Choose {
        v4: bool,
        v6: bool,
        choose_id: Option<u8>,
    },
}

impl Default for FTeid {
    fn default() -> Self {
        FTeid::Choose {
            v4: true,
            v6: false,
            choose_id: None,
        }
    }
}

const FT_V4: u8 = 0x01;
const FT_V6: u8 = 0x02;
const FT_CH: u8 = 0x04;
const FT_CHID: u8 = 0x08;

impl Value for FTeid {
    const TYPE: IeType = IeType::F_TEID;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        let flags = r.u8()?;
        if flags & FT_CH != 0 {
            // With CH, TEID and addresses are absent; V4/V6 ask for a
            // version (§8.2.3).
            let choose_id = if flags & FT_CHID != 0 {
                Some(r.u8()?)
            } else {
                None
            };
            return Ok(FTeid::Choose {
                v4: flags & FT_V4 != 0,
                v6: flags & FT_V6 != 0,
                choose_id,
            });
        }
        if flags & FT_CHID != 0 {
            return Err(r.incorrect());
        }
        let teid = r.u32()?;
        let v4 = if flags & FT_V4 != 0 {
            Some(r.ipv4()?)
        } else {
            None
        };
        let v6 = if flags & FT_V6 != 0 {
            Some(r.ipv6()?)
        } else {
            None
        };
        if v4.is_none() && v6.is_none() {
            return Err(r.incorrect());
        }
        Ok(FTeid::Assigned { teid, v4, v6 })
    }
    fn emit(&self, w: &mut Writer<'_>) {
        match *self {
            FTeid::Assigned { teid, v4, v6 } => {
                w.u8(if v4.is_some() { FT_V4 } else { 0 } | if v6.is_some() { FT_V6 } else { 0 });
                w.u32(teid);
                if let Some(a) = v4 {
                    w.ipv4(a);
                }
                if let Some(a) = v6 {
                    w.ipv6(a);
                }
            }
            FTeid::Choose { v4, v6, choose_id } => {
                w.u8(FT_CH
                    | if v4 { FT_V4 } else { 0 }
                    | if v6 { FT_V6 } else { 0 }
                    | if choose_id.is_some() { FT_CHID } else { 0 });
                if let Some(id) = choose_id {
                    w.u8(id);
                }
            }
        }
    }
}

/// SDF Filter (§8.2.5): a packet filter of a PDI. The Flow Description
/// is kept as sent (its text, checked where it is applied:
/// [`crate::flow::FlowDescription`]); the other fields as numbers.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct SdfFilter {
    /// FD: the Flow Description's text.
    pub flow_description: Option<Vec<u8>>,
    /// TTC: ToS (IPv4) or Traffic Class (IPv6) value and mask.
    pub tos_traffic_class: Option<(u8, u8)>,
    /// SPI: the IPsec Security Parameter Index.
    pub spi: Option<u32>,
    /// FL: the IPv6 Flow Label (20 bits).
    pub flow_label: Option<u32>,
    /// BID: the SDF Filter ID.
    pub filter_id: Option<u32>,
}

impl SdfFilter {
    const FD: u8 = 0x01;
    const TTC: u8 = 0x02;
    const SPI: u8 = 0x04;
    const FL: u8 = 0x08;
    const BID: u8 = 0x10;
}

impl Value for SdfFilter {
    const TYPE: IeType = IeType::SDF_FILTER;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        let f = r.u8()?;
        let _spare = r.u8()?;
        let mut s = SdfFilter::default();
        if f & Self::FD != 0 {
            let n = usize::from(r.u16()?);
            s.flow_description = Some(r.take(n)?.to_vec());
        }
        if f & Self::TTC != 0 {
            s.tos_traffic_class = Some((r.u8()?, r.u8()?));
        }
        if f & Self::SPI != 0 {
            s.spi = Some(r.u32()?);
        }
        if f & Self::FL != 0 {
            s.flow_label = Some(r.u24()? & 0x000f_ffff);
        }
        if f & Self::BID != 0 {
            s.filter_id = Some(r.u32()?);
        }
        Ok(s)
    }
    fn emit(&self, w: &mut Writer<'_>) {
        let bit = |c: bool, b: u8| if c { b } else { 0 };
        w.u8(bit(self.flow_description.is_some(), Self::FD)
            | bit(self.tos_traffic_class.is_some(), Self::TTC)
            | bit(self.spi.is_some(), Self::SPI)
            | bit(self.flow_label.is_some(), Self::FL)
            | bit(self.filter_id.is_some(), Self::BID));
        w.u8(0);
        if let Some(d) = &self.flow_description {
            w.u16(d.len() as u16);
            w.bytes(d);
        }
        if let Some((v, m)) = self.tos_traffic_class {
            w.u8(v);
            w.u8(m);
        }
        if let Some(x) = self.spi {
            w.u32(x);
        }
        if let Some(x) = self.flow_label {
            w.u24(x & 0x000f_ffff);
        }
        if let Some(x) = self.filter_id {
            w.u32(x);
        }
    }
}

/// UE IP Address (§8.2.62).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct UeIpAddress {
    pub v4: Option<Ipv4Addr>,
    pub v6: Option<Ipv6Addr>,
    /// S/D: the address is the destination (downlink PDI) rather than
    /// the source (uplink PDI).
    pub destination: bool,
    /// IPv6 Prefix Delegation Bits: the prefix is that many bits shorter
    /// than /64.
    pub v6_delegation_bits: Option<u8>,
    /// IPv6 Prefix Length (IP6PL): e.g. 128 for one address.
    pub v6_prefix_len: Option<u8>,
    /// CHV4 / CHV6: the UP function is to allocate the address (tep does
    /// not: refused with "Rule creation/modification failure").
    pub choose_v4: bool,
    pub choose_v6: bool,
}

impl UeIpAddress {
    const V6: u8 = 0x01;
    const V4: u8 = 0x02;
    const SD: u8 = 0x04;
    const IPV6D: u8 = 0x08;
    const CHV4: u8 = 0x10;
    const CHV6: u8 = 0x20;
    const IP6PL: u8 = 0x40;

    /// The IPv6 prefix length this matches: IP6PL if given, else /64 less
    /// the delegation bits (a UE gets a /64 per TS 23.501 §5.8.2.2).
    pub fn v6_match_len(&self) -> u8 {
        match (self.v6_prefix_len, self.v6_delegation_bits) {
            (Some(l), _) => l.min(128),
            (None, Some(b)) => 64u8.saturating_sub(b),
            (None, None) => 64,
        }
    }
}

impl Value for UeIpAddress {
    const TYPE: IeType = IeType::UE_IP_ADDRESS;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        let f = r.u8()?;
        let v4 = if f & Self::V4 != 0 {
            Some(r.ipv4()?)
        } else {
            None
        };
        let v6 = if f & Self::V6 != 0 {
            Some(r.ipv6()?)
        } else {
            None
        };
        let v6_delegation_bits = if f & Self::IPV6D != 0 {
            Some(r.u8()?)
        } else {
            None
        };
        let v6_prefix_len = if f & Self::IP6PL != 0 {
            Some(r.u8()?)
        } else {
            None
        };
        Ok(UeIpAddress {
            v4,
            v6,
            destination: f & Self::SD != 0,
            v6_delegation_bits,
            v6_prefix_len,
            choose_v4: f & Self::CHV4 != 0,
            choose_v6: f & Self::CHV6 != 0,
        })
    }
    fn emit(&self, w: &mut Writer<'_>) {
        let bit = |c: bool, b: u8| if c { b } else { 0 };
        w.u8(bit(self.v4.is_some(), Self::V4)
            | bit(self.v6.is_some(), Self::V6)
            | bit(self.destination, Self::SD)
            | bit(self.v6_delegation_bits.is_some(), Self::IPV6D)
            | bit(self.choose_v4, Self::CHV4)
            | bit(self.choose_v6, Self::CHV6)
            | bit(self.v6_prefix_len.is_some(), Self::IP6PL));
        if let Some(a) = self.v4 {
            w.ipv4(a);
        }
        if let Some(a) = self.v6 {
            w.ipv6(a);
        }
        if let Some(b) = self.v6_delegation_bits {
            w.u8(b);
        }
        if let Some(l) = self.v6_prefix_len {
            w.u8(l);
        }
    }
}

/// Outer Header Creation (§8.2.56): the description (2 octets) and the
/// fields it announces. Parse fills exactly the fields the description
/// announces; emit writes them (0 for one left `None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct OuterHeaderCreation {
    pub desc: u16,
    pub teid: Option<u32>,
    pub v4: Option<Ipv4Addr>,
    pub v6: Option<Ipv6Addr>,
    pub port: Option<u16>,
    pub c_tag: Option<u32>,
    pub s_tag: Option<u32>,
}

impl OuterHeaderCreation {
    pub const GTPU_UDP_IPV4: u16 = 0x0001;
    pub const GTPU_UDP_IPV6: u16 = 0x0002;
    pub const UDP_IPV4: u16 = 0x0004;
    pub const UDP_IPV6: u16 = 0x0008;
    pub const IPV4: u16 = 0x0010;
    pub const IPV6: u16 = 0x0020;
    pub const C_TAG: u16 = 0x0040;
    pub const S_TAG: u16 = 0x0080;
    pub const N19: u16 = 0x0100;
    pub const N6: u16 = 0x0200;

    const HAS_TEID: u16 = Self::GTPU_UDP_IPV4 | Self::GTPU_UDP_IPV6;
    const HAS_V4: u16 = Self::GTPU_UDP_IPV4 | Self::UDP_IPV4 | Self::IPV4;
    const HAS_V6: u16 = Self::GTPU_UDP_IPV6 | Self::UDP_IPV6 | Self::IPV6;
    const HAS_PORT: u16 = Self::UDP_IPV4 | Self::UDP_IPV6;

    /// GTP-U/UDP/IP towards `teid` at `addr`.
    pub fn gtpu(teid: u32, addr: IpAddr) -> Self {
        match addr {
            IpAddr::V4(a) => OuterHeaderCreation {
                desc: Self::GTPU_UDP_IPV4,
                teid: Some(teid),
                v4: Some(a),
                ..Default::default()
            },
            IpAddr::V6(a) => OuterHeaderCreation {
                desc: Self::GTPU_UDP_IPV6,
                teid: Some(teid),
                v6: Some(a),
                ..Default::default()
            },
        }
    }
}

impl Value for OuterHeaderCreation {
    const TYPE: IeType = IeType::OUTER_HEADER_CREATION;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        let lo = r.u8()?;
        let hi = r.u8()?;
        let desc = u16::from(lo) | u16::from(hi) << 8;
        if lo == 0 {
            return Err(r.incorrect());
        }
        let mut o = OuterHeaderCreation {
            desc,
            ..Default::default()
        };
        if desc & Self::HAS_TEID != 0 {
            o.teid = Some(r.u32()?);
        }
        if desc & Self::HAS_V4 != 0 {
            o.v4 = Some(r.ipv4()?);
        }
        if desc & Self::HAS_V6 != 0 {
            o.v6 = Some(r.ipv6()?);
        }
        if desc & Self::HAS_PORT != 0 {
            o.port = Some(r.u16()?);
        }
        if desc & Self::C_TAG != 0 {
            o.c_tag = Some(r.u24()?);
        }
        if desc & Self::S_TAG != 0 {
            o.s_tag = Some(r.u24()?);
        }
        Ok(o)
    }
    fn emit(&self, w: &mut Writer<'_>) {
        let d = self.desc;
        w.u8(d as u8);
        w.u8((d >> 8) as u8);
        if d & Self::HAS_TEID != 0 {
            w.u32(self.teid.unwrap_or(0));
        }
        if d & Self::HAS_V4 != 0 {
            w.ipv4(self.v4.unwrap_or(Ipv4Addr::UNSPECIFIED));
        }
        if d & Self::HAS_V6 != 0 {
            w.ipv6(self.v6.unwrap_or(Ipv6Addr::UNSPECIFIED));
        }
        if d & Self::HAS_PORT != 0 {
            w.u16(self.port.unwrap_or(0));
        }
        if d & Self::C_TAG != 0 {
            w.u24(self.c_tag.unwrap_or(0));
        }
        if d & Self::S_TAG != 0 {
            w.u24(self.s_tag.unwrap_or(0));
        }
    }
}

/// Outer Header Removal (§8.2.64): what to strip, and the optional GTP-U
/// Extension Header Deletion octet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct OuterHeaderRemoval {
    pub desc: u8,
    pub ext_deletion: Option<u8>,
}

impl OuterHeaderRemoval {
    pub const GTPU_UDP_IPV4: u8 = 0;
    pub const GTPU_UDP_IPV6: u8 = 1;
    pub const UDP_IPV4: u8 = 2;
    pub const UDP_IPV6: u8 = 3;
    pub const IPV4: u8 = 4;
    pub const IPV6: u8 = 5;
    pub const GTPU_UDP_IP: u8 = 6;

    /// Whether this removes a GTP-U/UDP/IP header (what tep's user plane
    /// does on N3/N9).
    pub const fn is_gtpu(&self) -> bool {
        matches!(
            self.desc,
            Self::GTPU_UDP_IPV4 | Self::GTPU_UDP_IPV6 | Self::GTPU_UDP_IP
        )
    }
}

impl Value for OuterHeaderRemoval {
    const TYPE: IeType = IeType::OUTER_HEADER_REMOVAL;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        let desc = r.u8()?;
        let ext_deletion = if r.is_empty() { None } else { Some(r.u8()?) };
        Ok(OuterHeaderRemoval { desc, ext_deletion })
    }
    fn emit(&self, w: &mut Writer<'_>) {
        w.u8(self.desc);
        if let Some(e) = self.ext_deletion {
            w.u8(e);
        }
    }
}

/// Volume Threshold (§8.2.13): octets, total / uplink / downlink.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct VolumeThreshold {
    pub total: Option<u64>,
    pub uplink: Option<u64>,
    pub downlink: Option<u64>,
}

const TOVOL: u8 = 0x01;
const ULVOL: u8 = 0x02;
const DLVOL: u8 = 0x04;
const TONOP: u8 = 0x08;
const ULNOP: u8 = 0x10;
const DLNOP: u8 = 0x20;

fn read_if(r: &mut Reader<'_>, flags: u8, bit: u8) -> Result<Option<u64>, IeError> {
    if flags & bit != 0 {
        r.u64().map(Some)
    } else {
        Ok(None)
    }
}

fn flag(v: Option<u64>, bit: u8) -> u8 {
    if v.is_some() {
        bit
    } else {
        0
    }
}

impl Value for VolumeThreshold {
    const TYPE: IeType = IeType::VOLUME_THRESHOLD;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        let f = r.u8()?;
        Ok(VolumeThreshold {
            total: read_if(r, f, TOVOL)?,
            uplink: read_if(r, f, ULVOL)?,
            downlink: read_if(r, f, DLVOL)?,
        })
    }
    fn emit(&self, w: &mut Writer<'_>) {
        w.u8(flag(self.total, TOVOL) | flag(self.uplink, ULVOL) | flag(self.downlink, DLVOL));
        for v in [self.total, self.uplink, self.downlink]
            .into_iter()
            .flatten()
        {
            w.u64(v);
        }
    }
}

/// Volume Quota (§8.2.50): octets allowed, total / uplink / downlink; the
/// layout of [`VolumeThreshold`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct VolumeQuota(pub VolumeThreshold);

impl Value for VolumeQuota {
    const TYPE: IeType = IeType::VOLUME_QUOTA;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        VolumeThreshold::parse(r).map(VolumeQuota)
    }
    fn emit(&self, w: &mut Writer<'_>) {
        self.0.emit(w)
    }
}

/// Volume Measurement (§8.2.44): octets and packets, total / uplink /
/// downlink; the packet counts are the Rel-15 TONOP/ULNOP/DLNOP fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct VolumeMeasurement {
    pub total: Option<u64>,
    pub uplink: Option<u64>,
    pub downlink: Option<u64>,
    pub total_packets: Option<u64>,
    pub uplink_packets: Option<u64>,
    pub downlink_packets: Option<u64>,
}

impl Value for VolumeMeasurement {
    const TYPE: IeType = IeType::VOLUME_MEASUREMENT;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        let f = r.u8()?;
        Ok(VolumeMeasurement {
            total: read_if(r, f, TOVOL)?,
            uplink: read_if(r, f, ULVOL)?,
            downlink: read_if(r, f, DLVOL)?,
            total_packets: read_if(r, f, TONOP)?,
            uplink_packets: read_if(r, f, ULNOP)?,
            downlink_packets: read_if(r, f, DLNOP)?,
        })
    }
    fn emit(&self, w: &mut Writer<'_>) {
        w.u8(flag(self.total, TOVOL)
            | flag(self.uplink, ULVOL)
            | flag(self.downlink, DLVOL)
            | flag(self.total_packets, TONOP)
            | flag(self.uplink_packets, ULNOP)
            | flag(self.downlink_packets, DLNOP));
        for v in [
            self.total,
            self.uplink,
            self.downlink,
            self.total_packets,
            self.uplink_packets,
            self.downlink_packets,
        ]
        .into_iter()
        .flatten()
        {
            w.u64(v);
        }
    }
}

/// Failed Rule ID (§8.2.80): the rule a creation or modification failed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailedRuleId {
    Pdr(u16),
    Far(u32),
    Qer(u32),
    Urr(u32),
    Bar(u8),
}

impl Value for FailedRuleId {
    const TYPE: IeType = IeType::FAILED_RULE_ID;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        match r.u8()? & 0x1f {
            0 => r.u16().map(FailedRuleId::Pdr),
            1 => r.u32().map(FailedRuleId::Far),
            2 => r.u32().map(FailedRuleId::Qer),
            3 => r.u32().map(FailedRuleId::Urr),
            4 => r.u8().map(FailedRuleId::Bar),
            _ => Err(r.incorrect()),
        }
    }
    fn emit(&self, w: &mut Writer<'_>) {
        match *self {
            FailedRuleId::Pdr(v) => {
                w.u8(0);
                w.u16(v);
            }
            FailedRuleId::Far(v) => {
                w.u8(1);
                w.u32(v);
            }
            FailedRuleId::Qer(v) => {
                w.u8(2);
                w.u32(v);
            }
            FailedRuleId::Urr(v) => {
                w.u8(3);
                w.u32(v);
            }
            FailedRuleId::Bar(v) => {
                w.u8(4);
                w.u8(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<V: Value>(v: &V) -> Vec<u8> {
        let mut b = vec![];
        v.emit(&mut Writer::new(&mut b));
        b
    }

    #[test]
    fn f_teid_forms() {
        let ch = FTeid::Choose {
            v4: true,
            v6: false,
            choose_id: Some(7),
        };
        assert_eq!(bytes(&ch), [0x0d, 7]);
        assert_eq!(FTeid::from_ie(&[0x0d, 7]), Ok(ch));
        let a = FTeid::Assigned {
            teid: 0x11223344,
            v4: Some(Ipv4Addr::new(10, 0, 0, 1)),
            v6: None,
        };
        assert_eq!(bytes(&a), [1, 0x11, 0x22, 0x33, 0x44, 10, 0, 0, 1]);
        // No address at all, CHID without CH, too short for V4.
        assert!(FTeid::from_ie(&[0, 1, 2, 3, 4]).is_err());
        assert!(FTeid::from_ie(&[0x09, 1, 2, 3, 4, 1, 2, 3, 4]).is_err());
        assert!(FTeid::from_ie(&[0x01, 1, 2, 3, 4, 1, 2, 3]).is_err());
    }

    #[test]
    fn apply_action_needs_exactly_one_primary_action() {
        assert_eq!(
            ApplyAction::from_ie(&[0x0c]).unwrap(),
            ApplyAction::new(ApplyAction::BUFF | ApplyAction::NOCP)
        );
        assert_eq!(
            ApplyAction::from_ie(&[0x02, 0x01]).unwrap().0,
            Bitmap::new(0x0102, 2)
        );
        assert!(ApplyAction::from_ie(&[0x03]).is_err());
        assert!(ApplyAction::from_ie(&[0x08]).is_err());
        assert!(ApplyAction::from_ie(&[]).is_err());
    }

    #[test]
    fn ue_ip_prefix_lengths() {
        let u = UeIpAddress::from_ie(&[
            0x45, 0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 128,
        ])
        .unwrap();
        assert!(u.destination);
        assert_eq!(u.v6_match_len(), 128);
        let p = UeIpAddress {
            v6: Some(Ipv6Addr::LOCALHOST),
            ..Default::default()
        };
        assert_eq!(p.v6_match_len(), 64);
        assert!(UeIpAddress::from_ie(&[0x02, 1, 2, 3]).is_err());
    }

    #[test]
    fn volume_measurement_packet_counts_follow_volumes() {
        let v = VolumeMeasurement {
            total: Some(300),
            uplink: Some(100),
            downlink: Some(200),
            total_packets: Some(3),
            uplink_packets: Some(1),
            downlink_packets: Some(2),
        };
        let b = bytes(&v);
        assert_eq!(b[0], 0x3f);
        assert_eq!(b.len(), 1 + 6 * 8);
        assert_eq!(b[1 + 3 * 8..1 + 4 * 8], 3u64.to_be_bytes());
        assert_eq!(VolumeMeasurement::from_ie(&b), Ok(v));
    }

    #[test]
    fn node_id_kinds() {
        let n = NodeId::fqdn("upf.tep").unwrap();
        assert_eq!(bytes(&n), b"\x02\x03upf\x03tep");
        assert_eq!(NodeId::from_ie(b"\x02\x03upf\x03tep"), Ok(n));
        assert!(NodeId::from_ie(&[2]).is_err());
        assert!(NodeId::from_ie(&[3, 1, 2, 3, 4]).is_err());
        assert!(NodeId::from_ie(&[0, 1, 2, 3]).is_err());
    }

    #[test]
    fn outer_header_creation_fields_follow_the_description() {
        let o = OuterHeaderCreation::gtpu(9, IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9)));
        assert_eq!(bytes(&o), [1, 0, 0, 0, 0, 9, 192, 0, 2, 9]);
        assert_eq!(OuterHeaderCreation::from_ie(&bytes(&o)), Ok(o));
        assert!(OuterHeaderCreation::from_ie(&[0, 0]).is_err());
        assert!(OuterHeaderCreation::from_ie(&[1, 0, 0, 0, 0, 9, 192]).is_err());
    }

    /// Labels or text, compared without case; what is neither a whole
    /// label sequence nor short enough matches as text or not at all.
    #[test]
    fn network_names_from_labels_or_text() {
        let n = |b: &[u8]| NetworkName::of(b);
        assert!(n(b"\x08internet").is("internet"));
        assert!(n(b"\x08Internet").is("internet"));
        assert!(n(b"internet").is("internet"));
        assert!(n(b"INTERNET").is("internet"));
        assert!(n(b"\x03ims\x06mnc001\x06mcc001\x04gprs").is("ims.mnc001.mcc001.gprs"));
        assert!(n(b"ims.mnc001.mcc001.gprs").is("ims.mnc001.mcc001.gprs"));
        // A length past the end, a bad label octet: the octets as text.
        assert!(n(b"\x09internet").is("\x09internet"));
        assert!(!n(b"\x09internet").is("internet"));
        assert!(!n(b"\x04ims_").is("ims_"));
        assert!(!n(b"\x08internet\x00").is("internet"));
        assert!(!n(b"").is("internet"));
        assert!(n(b"").is(""));
        let long = [b'a'; 100];
        assert!(!n(&long).is(core::str::from_utf8(&long).unwrap()));
        assert!(!n(&long).is(""));
        assert_eq!(format!("{:?}", n(b"\x03ims")), "NetworkName(\"ims\")");
    }
}
