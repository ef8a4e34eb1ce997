//! Information elements (TS 29.244 §8.1): the TLV walk, IE types, the
//! reader of an IE's value and the writer of TLVs.
//!
//! ```text
//!  octets 1..2   type (bit 8 of octet 1 set: vendor-specific)
//!  octets 3..4   length n: the octets after these four
//!  (5..6         Enterprise ID, vendor-specific IEs only)
//!  then          the value, or the children of a grouped IE
//! ```

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

use crate::cause::Cause;

/// An IE type (TS 29.244 §8.1.2, Table 8.1.2-1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct IeType(pub u16);

impl IeType {
    pub const CREATE_PDR: IeType = IeType(1);
    pub const PDI: IeType = IeType(2);
    pub const CREATE_FAR: IeType = IeType(3);
    pub const FORWARDING_PARAMETERS: IeType = IeType(4);
    pub const CREATE_URR: IeType = IeType(6);
    pub const CREATE_QER: IeType = IeType(7);
    pub const CREATED_PDR: IeType = IeType(8);
    pub const UPDATE_PDR: IeType = IeType(9);
    pub const UPDATE_FAR: IeType = IeType(10);
    pub const UPDATE_FORWARDING_PARAMETERS: IeType = IeType(11);
    pub const UPDATE_BAR_SRR: IeType = IeType(12);
    pub const UPDATE_URR: IeType = IeType(13);
    pub const UPDATE_QER: IeType = IeType(14);
    pub const REMOVE_PDR: IeType = IeType(15);
    pub const REMOVE_FAR: IeType = IeType(16);
    pub const REMOVE_URR: IeType = IeType(17);
    pub const REMOVE_QER: IeType = IeType(18);
    pub const CAUSE: IeType = IeType(19);
    pub const SOURCE_INTERFACE: IeType = IeType(20);
    pub const F_TEID: IeType = IeType(21);
    pub const NETWORK_INSTANCE: IeType = IeType(22);
    pub const SDF_FILTER: IeType = IeType(23);
    pub const GATE_STATUS: IeType = IeType(25);
    pub const MBR: IeType = IeType(26);
    pub const GBR: IeType = IeType(27);
    pub const PRECEDENCE: IeType = IeType(29);
    pub const TRANSPORT_LEVEL_MARKING: IeType = IeType(30);
    pub const VOLUME_THRESHOLD: IeType = IeType(31);
    pub const TIME_THRESHOLD: IeType = IeType(32);
    pub const INACTIVITY_DETECTION_TIME: IeType = IeType(36);
    pub const REPORTING_TRIGGERS: IeType = IeType(37);
    pub const REPORT_TYPE: IeType = IeType(39);
    pub const OFFENDING_IE: IeType = IeType(40);
    pub const DESTINATION_INTERFACE: IeType = IeType(42);
    pub const UP_FUNCTION_FEATURES: IeType = IeType(43);
    pub const APPLY_ACTION: IeType = IeType(44);
    pub const DOWNLINK_DATA_NOTIFICATION_DELAY: IeType = IeType(46);
    pub const PFCPSMREQ_FLAGS: IeType = IeType(49);
    pub const PFCPSRRSP_FLAGS: IeType = IeType(50);
    pub const PDR_ID: IeType = IeType(56);
    pub const F_SEID: IeType = IeType(57);
    pub const NODE_ID: IeType = IeType(60);
    pub const MEASUREMENT_METHOD: IeType = IeType(62);
    pub const USAGE_REPORT_TRIGGER: IeType = IeType(63);
    pub const MEASUREMENT_PERIOD: IeType = IeType(64);
    pub const VOLUME_MEASUREMENT: IeType = IeType(66);
    pub const DURATION_MEASUREMENT: IeType = IeType(67);
    pub const VOLUME_QUOTA: IeType = IeType(73);
    pub const TIME_QUOTA: IeType = IeType(74);
    pub const START_TIME: IeType = IeType(75);
    pub const END_TIME: IeType = IeType(76);
    pub const QUERY_URR: IeType = IeType(77);
    pub const USAGE_REPORT_SMR: IeType = IeType(78);
    pub const USAGE_REPORT_SDR: IeType = IeType(79);
    pub const USAGE_REPORT_SRR: IeType = IeType(80);
    pub const URR_ID: IeType = IeType(81);
    pub const DOWNLINK_DATA_REPORT: IeType = IeType(83);
    pub const OUTER_HEADER_CREATION: IeType = IeType(84);
    pub const UE_IP_ADDRESS: IeType = IeType(93);
    pub const OUTER_HEADER_REMOVAL: IeType = IeType(95);
    pub const RECOVERY_TIME_STAMP: IeType = IeType(96);
    pub const UR_SEQN: IeType = IeType(104);
    pub const FAR_ID: IeType = IeType(108);
    pub const QER_ID: IeType = IeType(109);
    pub const FAILED_RULE_ID: IeType = IeType(114);
    pub const QFI: IeType = IeType(124);
    pub const BAR_ID: IeType = IeType(88);
    pub const CREATE_BAR: IeType = IeType(85);
    pub const UPDATE_BAR: IeType = IeType(86);
    pub const REMOVE_BAR: IeType = IeType(87);
    pub const SUGGESTED_BUFFERING_PACKETS_COUNT: IeType = IeType(140);
    pub const PDN_TYPE: IeType = IeType(113);
    pub const USER_ID: IeType = IeType(141);
    pub const APN_DNN: IeType = IeType(159);
    pub const ERROR_INDICATION_REPORT: IeType = IeType(99);
    pub const NODE_REPORT_TYPE: IeType = IeType(101);
    pub const USER_PLANE_PATH_FAILURE_REPORT: IeType = IeType(102);
    pub const REMOTE_GTP_U_PEER: IeType = IeType(103);
    /// Release 16 (Table 7.4.5.1.3-1), past [`IeType::KNOWN_MAX`]: tep
    /// only sends it.
    pub const USER_PLANE_PATH_RECOVERY_REPORT: IeType = IeType(187);

    /// The highest IE type of the Table 8.1.2-1 tep follows: Release 15
    /// (0 to 160, the table scapy's contrib/pfcp.py names, which tep's
    /// codec is checked against). A type above it is one tep does not
    /// know at all, which §7.6.1 says a receiver silently discards ("the
    /// sending PFCP entity shall be able to safely include in a message a
    /// new conditional-optional or an optional IE. Such an IE may also
    /// have a new type value. Any legacy receiving PFCP entity shall,
    /// however, silently discard such an IE and continue processing");
    /// a type up to it is one tep knows, so a rule carrying one tep does
    /// not apply is refused ([`Skipped`]).
    pub const KNOWN_MAX: u16 = 160;

    /// Session-level IEs that tell the UP function about the session and
    /// ask nothing of it (Table 7.5.2.1-1): PDN Type (tep's UE addresses
    /// say the family), User ID, APN/DNN (tep has one data network).
    pub const INFORMATIONAL: [IeType; 3] = [IeType::PDN_TYPE, IeType::USER_ID, IeType::APN_DNN];

    /// Whether the type is vendor-specific (an Enterprise ID follows the
    /// length).
    pub const fn is_vendor(self) -> bool {
        self.0 & 0x8000 != 0
    }
}

impl fmt::Display for IeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IE {}", self.0)
    }
}

/// What is wrong with an IE, as the response says it: the Cause and the
/// type that goes in the Offending IE (the innermost IE at fault: for a
/// Create PDR without a PDR ID, the PDR ID's type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IeError {
    /// Mandatory IE missing, Conditional IE missing, Mandatory IE
    /// incorrect or Invalid length.
    pub cause: Cause,
    /// The offending IE's type.
    pub ie: IeType,
}

impl IeError {
    /// A mandatory IE is absent.
    pub const fn missing(ie: IeType) -> Self {
        IeError {
            cause: Cause::MANDATORY_IE_MISSING,
            ie,
        }
    }

    /// A conditional IE is absent where the condition asks for it.
    pub const fn conditional_missing(ie: IeType) -> Self {
        IeError {
            cause: Cause::CONDITIONAL_IE_MISSING,
            ie,
        }
    }

    /// An IE's content is wrong (too short for its flags, a forbidden
    /// value).
    pub const fn incorrect(ie: IeType) -> Self {
        IeError {
            cause: Cause::MANDATORY_IE_INCORRECT,
            ie,
        }
    }

    /// An IE's length runs past its message or group.
    pub const fn invalid_length(ie: IeType) -> Self {
        IeError {
            cause: Cause::INVALID_LENGTH,
            ie,
        }
    }
}

impl fmt::Display for IeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.cause, self.ie)
    }
}

/// The child IEs a group (or a session request) saw and did not decode:
/// known types tep does not apply, which get the rule refused, and the
/// count of unknown types (above [`IeType::KNOWN_MAX`]), discarded as
/// §7.6.1 asks. Vendor-specific IEs are neither (tep defines none; a
/// vendor's IE is the vendor's extension, discarded by [`walk`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Skipped {
    /// The first unsupported types, in message order.
    types: [IeType; Skipped::KEPT],
    /// How many unsupported IEs there were (past `KEPT` only counted).
    unsupported: u16,
    /// How many unknown IEs were discarded.
    pub unknown: u16,
}

impl Skipped {
    /// Unsupported types kept by name: the response names one.
    pub const KEPT: usize = 4;

    /// Notes child `t`, which the group does not decode.
    pub fn note(&mut self, t: IeType) {
        if t.0 > IeType::KNOWN_MAX {
            self.unknown = self.unknown.saturating_add(1);
        } else if !IeType::INFORMATIONAL.contains(&t) {
            if let Some(slot) = self.types.get_mut(self.unsupported as usize) {
                *slot = t;
            }
            self.unsupported = self.unsupported.saturating_add(1);
        }
    }

    /// The unsupported types kept (the first [`Self::KEPT`]).
    pub fn types(&self) -> &[IeType] {
        &self.types[..(self.unsupported as usize).min(Self::KEPT)]
    }

    /// The first unsupported type: what the response names.
    pub fn first(&self) -> Option<IeType> {
        self.types().first().copied()
    }

    /// This and a nested group's record together (the nested group's
    /// unsupported types come after this one's).
    pub fn and(mut self, nested: &Skipped) -> Skipped {
        for &t in nested.types() {
            self.note(t);
        }
        self.unknown = self.unknown.saturating_add(nested.unknown);
        self
    }
}

/// Field offsets of the IE header.
pub mod field {
    use core::ops::Range;
    pub const TYPE: Range<usize> = 0..2;
    pub const LENGTH: Range<usize> = 2..4;
    pub const VALUE: usize = 4;
    /// In a vendor-specific IE.
    pub const ENTERPRISE_ID: Range<usize> = 4..6;
}

/// The IE header's length.
pub const HEADER_LEN: usize = 4;

/// One IE: its type, the Enterprise ID of a vendor-specific one, and the
/// value (after the Enterprise ID).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ie<'a> {
    pub ty: IeType,
    pub enterprise: Option<u16>,
    pub value: &'a [u8],
}

/// Walks the IEs of a message or grouped IE. An IE whose header or value
/// runs past the data yields `Invalid length` with its type (or with the
/// enclosing `parent`'s type if not even the type is readable), then the
/// walk stops; each step consumes at least 4 octets, so it terminates.
#[derive(Debug, Clone)]
pub struct Ies<'a> {
    data: &'a [u8],
    parent: IeType,
}

impl<'a> Ies<'a> {
    /// Walks `data`; `parent` names the container for errors (the message
    /// has none: pass `IeType(0)`).
    pub fn new(data: &'a [u8], parent: IeType) -> Self {
        Ies { data, parent }
    }
}

impl<'a> Iterator for Ies<'a> {
    type Item = Result<Ie<'a>, IeError>;

    fn next(&mut self) -> Option<Self::Item> {
        let d = self.data;
        if d.is_empty() {
            return None;
        }
        self.data = &[];
        if d.len() < HEADER_LEN {
            let ty = if d.len() >= 2 {
                IeType(u16::from_be_bytes([d[0], d[1]]))
            } else {
                self.parent
            };
            return Some(Err(IeError::invalid_length(ty)));
        }
        let ty = IeType(u16::from_be_bytes([d[0], d[1]]));
        let len = u16::from_be_bytes([d[2], d[3]]) as usize;
        let end = HEADER_LEN + len;
        if end > d.len() {
            return Some(Err(IeError::invalid_length(ty)));
        }
        let mut value = &d[HEADER_LEN..end];
        let mut enterprise = None;
        if ty.is_vendor() {
            if value.len() < 2 {
                return Some(Err(IeError::invalid_length(ty)));
            }
            enterprise = Some(u16::from_be_bytes([value[0], value[1]]));
            value = &value[2..];
        }
        self.data = &d[end..];
        Some(Ok(Ie {
            ty,
            enterprise,
            value,
        }))
    }
}

/// Reads an IE's value front to back; running out is `Mandatory IE
/// incorrect` for that IE (its length cannot hold what its flags announce).
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    data: &'a [u8],
    ie: IeType,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8], ie: IeType) -> Self {
        Reader { data, ie }
    }

    /// The IE being read.
    pub fn ie(&self) -> IeType {
        self.ie
    }

    /// The error for this IE's content.
    pub fn incorrect(&self) -> IeError {
        IeError::incorrect(self.ie)
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], IeError> {
        if n > self.data.len() {
            return Err(self.incorrect());
        }
        let (a, b) = self.data.split_at(n);
        self.data = b;
        Ok(a)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], IeError> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    pub fn u8(&mut self) -> Result<u8, IeError> {
        Ok(self.take(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16, IeError> {
        self.array().map(u16::from_be_bytes)
    }

    pub fn u24(&mut self) -> Result<u32, IeError> {
        let [a, b, c] = self.array()?;
        Ok(u32::from_be_bytes([0, a, b, c]))
    }

    pub fn u32(&mut self) -> Result<u32, IeError> {
        self.array().map(u32::from_be_bytes)
    }

    pub fn u64(&mut self) -> Result<u64, IeError> {
        self.array().map(u64::from_be_bytes)
    }

    pub fn ipv4(&mut self) -> Result<Ipv4Addr, IeError> {
        self.array::<4>().map(Ipv4Addr::from)
    }

    pub fn ipv6(&mut self) -> Result<Ipv6Addr, IeError> {
        self.array::<16>().map(Ipv6Addr::from)
    }

    /// The rest of the value (a grouped IE's children, a string).
    pub fn rest(&mut self) -> &'a [u8] {
        core::mem::take(&mut self.data)
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// A leaf or grouped IE's value: parsed from its bytes, emitted as them.
pub trait Value: Sized {
    /// The IE type this value is sent as.
    const TYPE: IeType;
    /// Parses the value (the TLV's content). Octets past what the value
    /// uses are ignored (later releases append fields, §7.6).
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError>;
    /// Writes the value (the TLV's content).
    fn emit(&self, w: &mut Writer<'_>);

    /// Parses an IE's value of this type.
    fn from_ie(value: &[u8]) -> Result<Self, IeError> {
        Self::parse(&mut Reader::new(value, Self::TYPE))
    }
}

/// Writes TLVs into a growable buffer, patching each length after its
/// content.
#[derive(Debug)]
pub struct Writer<'a> {
    pub buf: &'a mut Vec<u8>,
}

impl<'a> Writer<'a> {
    pub fn new(buf: &'a mut Vec<u8>) -> Self {
        Writer { buf }
    }

    /// An IE of type `ty` whose content `f` writes.
    pub fn tlv(&mut self, ty: IeType, f: impl FnOnce(&mut Writer<'_>)) {
        let start = self.buf.len();
        self.buf.extend_from_slice(&ty.0.to_be_bytes());
        self.buf.extend_from_slice(&[0, 0]);
        f(self);
        let len = (self.buf.len() - start - HEADER_LEN).min(u16::MAX as usize) as u16;
        self.buf[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
    }

    /// An IE holding `v`.
    pub fn ie<V: Value>(&mut self, v: &V) {
        self.tlv(V::TYPE, |w| v.emit(w));
    }

    /// An IE holding `v` if there is one.
    pub fn opt<V: Value>(&mut self, v: &Option<V>) {
        if let Some(v) = v {
            self.ie(v);
        }
    }

    /// One IE per element.
    pub fn all<V: Value>(&mut self, vs: &[V]) {
        for v in vs {
            self.ie(v);
        }
    }

    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn u24(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes()[1..]);
    }
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    pub fn ipv4(&mut self, a: Ipv4Addr) {
        self.bytes(&a.octets());
    }
    pub fn ipv6(&mut self, a: Ipv6Addr) {
        self.bytes(&a.octets());
    }
}

/// Decodes the IEs of `data` (a message body or a group named `parent`)
/// by calling `f` for each 3GPP IE; vendor-specific IEs are skipped (tep
/// defines none). What `f` does with a type it does not decode is the
/// caller's: a rule group notes it ([`Skipped`]), a node message or a
/// report discards it.
pub fn walk<'a>(
    data: &'a [u8],
    parent: IeType,
    mut f: impl FnMut(IeType, &'a [u8]) -> Result<(), IeError>,
) -> Result<(), IeError> {
    for ie in Ies::new(data, parent) {
        let ie = ie?;
        if ie.enterprise.is_none() {
            f(ie.ty, ie.value)?;
        }
    }
    Ok(())
}

/// The first occurrence of a single-instance IE is kept (a repeat is
/// discarded, as TS 29.244 §7.6 does with unexpected IEs).
pub fn first<V: Value>(slot: &mut Option<V>, value: &[u8]) -> Result<(), IeError> {
    if slot.is_none() {
        *slot = Some(V::from_ie(value)?);
    }
    Ok(())
}

/// A mandatory IE, or `Mandatory IE missing` naming it.
pub fn need<V: Value>(v: Option<V>) -> Result<V, IeError> {
    v.ok_or(IeError::missing(V::TYPE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_skips_vendor_and_reports_overruns() {
        // A vendor IE (type 0x8001, enterprise 18681), then Cause 1.
        let d = [0x80, 0x01, 0, 3, 0x48, 0xf9, 0xaa, 0, 19, 0, 1, 1];
        let all: Vec<_> = Ies::new(&d, IeType(0)).collect();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].unwrap().enterprise, Some(18681));
        assert_eq!(all[0].unwrap().value, [0xaa]);
        let mut seen = vec![];
        walk(&d, IeType(0), |t, v| {
            seen.push((t, v.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, [(IeType::CAUSE, vec![1])]);
        // Length past the end: Invalid length naming the IE.
        let bad = [0, 19, 0, 2, 1];
        assert_eq!(
            walk(&bad, IeType(0), |_, _| Ok(())),
            Err(IeError::invalid_length(IeType::CAUSE))
        );
        // Three octets: the type is readable, the length is not.
        assert_eq!(
            walk(&bad[..3], IeType(0), |_, _| Ok(())),
            Err(IeError::invalid_length(IeType::CAUSE))
        );
        // One octet inside a Create PDR: the group is named.
        assert_eq!(
            walk(&[0], IeType::CREATE_PDR, |_, _| Ok(())),
            Err(IeError::invalid_length(IeType::CREATE_PDR))
        );
        // A vendor IE too short for its Enterprise ID.
        assert_eq!(
            walk(&[0x80, 1, 0, 1, 0], IeType(0), |_, _| Ok(())),
            Err(IeError::invalid_length(IeType(0x8001)))
        );
    }

    #[test]
    fn writer_patches_nested_lengths() {
        let mut b = vec![];
        let mut w = Writer::new(&mut b);
        w.tlv(IeType::CREATE_PDR, |w| {
            w.tlv(IeType::PDR_ID, |w| w.u16(7));
            w.tlv(IeType::PRECEDENCE, |w| w.u32(255));
        });
        assert_eq!(
            b,
            [0, 1, 0, 14, 0, 56, 0, 2, 0, 7, 0, 29, 0, 4, 0, 0, 0, 255]
        );
    }
}
