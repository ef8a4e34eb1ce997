//! Geneve (RFC 8926): an 8-byte base header followed by up to 252 bytes of
//! TLV options, then the payload (usually Ethernet, protocol 0x6558).
//!
//! `new_checked` walks the option list once, so afterwards the options
//! iterator cannot meet an option that runs past the option area; on an
//! unchecked packet the iterator reports such an option as an `Err` item and
//! stops.

use core::fmt;

use crate::ethernet::EtherType;
use crate::{get_u16, get_u32, set_u16, Error, Result};

/// Field offsets in the header, public for the dataplane's fast paths,
/// which read and write them in place where a view would cost a check.
pub mod field {
    use core::ops::Range;

    pub const VER_OPT_LEN: usize = 0;
    pub const FLAGS: usize = 1;
    pub const PROTOCOL: Range<usize> = 2..4;
    pub const VNI: Range<usize> = 4..7;
    pub const RESERVED: usize = 7;
    pub const OPTIONS: usize = 8;

    // Within one option.
    pub const OPT_CLASS: Range<usize> = 0..2;
    pub const OPT_TYPE: usize = 2;
    pub const OPT_LEN: usize = 3;
    pub const OPT_DATA: usize = 4;
}

/// The base header.
pub const HEADER_LEN: usize = 8;
/// Base header plus the most options `opt len` can announce (63 * 4).
pub const MAX_HEADER_LEN: usize = HEADER_LEN + 63 * 4;
/// O: control (OAM) packet (RFC 8926 §3.4).
pub const FLAG_O: u8 = 0x80;
/// C: critical options present.
pub const FLAG_C: u8 = 0x40;
/// Type bit that makes an option critical (§3.5.1).
pub const OPT_TYPE_CRITICAL: u8 = 0x80;
/// The option header: class, type, reserved|length.
pub const OPT_HEADER_LEN: usize = 4;
/// The most data one option can carry (5-bit length in 4-byte units).
pub const OPT_MAX_DATA_LEN: usize = 31 * 4;

/// One option TLV. Used both for options read from a packet (borrowing its
/// bytes) and for options to emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GeneveOption<'a> {
    /// Option class (namespace, IANA registry).
    pub class: u16,
    /// Type; the high bit marks a critical option.
    pub typ: u8,
    /// Option data, a multiple of 4 bytes, at most 124.
    pub data: &'a [u8],
}

impl<'a> GeneveOption<'a> {
    /// A receiver that does not understand a critical option must drop the
    /// packet (RFC 8926 §3.5.1).
    pub const fn critical(&self) -> bool {
        self.typ & OPT_TYPE_CRITICAL != 0
    }

    /// Bytes `emit` writes: 4 + data.
    pub const fn buffer_len(&self) -> usize {
        OPT_HEADER_LEN + self.data.len()
    }

    /// Writes the TLV. Panics if `buf` is short; the data length must be a
    /// multiple of 4 up to 124 (checked in debug builds, truncated to that
    /// grid otherwise).
    pub fn emit(&self, buf: &mut [u8]) {
        debug_assert!(self.data.len() & 3 == 0 && self.data.len() <= OPT_MAX_DATA_LEN);
        set_u16(buf, field::OPT_CLASS.start, self.class);
        buf[field::OPT_TYPE] = self.typ;
        buf[field::OPT_LEN] = ((self.data.len() / 4) & 0x1f) as u8;
        buf[field::OPT_DATA..field::OPT_DATA + self.data.len()].copy_from_slice(self.data);
    }
}

impl fmt::Display for GeneveOption<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "opt class=0x{:04x} type=0x{:02x} len={}",
            self.class,
            self.typ,
            self.data.len()
        )?;
        if self.critical() {
            f.write_str(" critical")?;
        }
        Ok(())
    }
}

/// Iterates over the TLVs of an option area. Yields `Err(Malformed)` once
/// (then stops) for an option that runs past the area.
#[derive(Debug, Clone)]
pub struct Options<'a> {
    data: &'a [u8],
}

impl<'a> Options<'a> {
    /// Iterates over raw option bytes (e.g. `GeneveRepr::options`).
    pub const fn new(data: &'a [u8]) -> Options<'a> {
        Options { data }
    }
}

impl<'a> Iterator for Options<'a> {
    type Item = Result<GeneveOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.data.is_empty() {
            return None;
        }
        let d = self.data;
        if d.len() < OPT_HEADER_LEN {
            self.data = &[];
            return Some(Err(Error::Malformed));
        }
        let len = OPT_HEADER_LEN + usize::from(d[field::OPT_LEN] & 0x1f) * 4;
        if d.len() < len {
            self.data = &[];
            return Some(Err(Error::Malformed));
        }
        self.data = &d[len..];
        Some(Ok(GeneveOption {
            class: get_u16(d, field::OPT_CLASS.start),
            typ: d[field::OPT_TYPE],
            data: &d[field::OPT_DATA..len],
        }))
    }
}

/// Writes `options` back to back into `buf`; returns the bytes written.
/// Panics if `buf` is short.
pub fn emit_options(options: &[GeneveOption<'_>], buf: &mut [u8]) -> usize {
    let mut at = 0;
    for o in options {
        o.emit(&mut buf[at..]);
        at += o.buffer_len();
    }
    at
}

packet_view! {
    /// A read/write view of a Geneve header, its options and payload.
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// `Truncated` if the buffer ends inside the base header or the option
    /// area; `Malformed` if an option overruns the option area.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < self.header_len() {
            return Err(Error::Truncated);
        }
        for o in self.options_iter() {
            o?;
        }
        Ok(())
    }

    /// Version (2 bits).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_OPT_LEN] >> 6
    }

    /// Option area length in 4-byte units.
    #[inline]
    pub fn opt_len(&self) -> u8 {
        self.buffer.as_ref()[field::VER_OPT_LEN] & 0x3f
    }

    /// O bit.
    #[inline]
    pub fn oam(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_O != 0
    }

    /// C bit.
    #[inline]
    pub fn critical(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_C != 0
    }

    /// The 6 reserved flag bits (ignored on receipt, RFC 8926 §3.4).
    #[inline]
    pub fn reserved_flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] & 0x3f
    }

    /// Protocol type of the payload.
    #[inline]
    pub fn protocol(&self) -> EtherType {
        EtherType::from(get_u16(self.buffer.as_ref(), field::PROTOCOL.start))
    }

    /// The 24-bit VNI.
    #[inline]
    pub fn vni(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VNI.start) >> 8
    }

    /// The last reserved byte.
    #[inline]
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::RESERVED]
    }

    /// Base header plus options.
    #[inline]
    pub fn header_len(&self) -> usize {
        HEADER_LEN + usize::from(self.opt_len()) * 4
    }

    /// Whether any option has the critical type bit (independent of C).
    pub fn has_critical_options(&self) -> bool {
        self.options_iter().any(|o| o.is_ok_and(|o| o.critical()))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The raw option area.
    #[inline]
    pub fn options_bytes(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::OPTIONS..self.header_len()]
    }

    /// The options.
    #[inline]
    pub fn options(&self) -> Options<'a> {
        Options::new(self.options_bytes())
    }

    /// The bytes after the options.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Options over whatever part of the option area the buffer holds.
    fn options_iter(&self) -> Options<'_> {
        let b = self.buffer.as_ref();
        Options::new(&b[field::OPTIONS.min(b.len())..self.header_len().min(b.len())])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version (2 bits) and opt len (6 bits, 4-byte units).
    #[inline]
    pub fn set_version_opt_len(&mut self, version: u8, opt_len: u8) {
        self.buffer.as_mut()[field::VER_OPT_LEN] = (version << 6) | (opt_len & 0x3f)
    }

    /// Sets the O and C bits (reserved flag bits cleared).
    #[inline]
    pub fn set_flags(&mut self, oam: bool, critical: bool) {
        self.buffer.as_mut()[field::FLAGS] =
            if oam { FLAG_O } else { 0 } | if critical { FLAG_C } else { 0 }
    }

    /// Sets the protocol type.
    #[inline]
    pub fn set_protocol(&mut self, value: EtherType) {
        set_u16(self.buffer.as_mut(), field::PROTOCOL.start, value.into())
    }

    /// Sets the VNI (24 bits) and clears the reserved byte.
    #[inline]
    pub fn set_vni(&mut self, vni: u32) {
        let b = self.buffer.as_mut();
        b[field::VNI.start..=field::RESERVED].copy_from_slice(&(vni << 8).to_be_bytes());
    }

    /// The option area, mutable.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[field::OPTIONS..end]
    }

    /// The bytes after the options, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let at = self.header_len();
        &mut self.buffer.as_mut()[at..]
    }
}

/// The meaning of a Geneve header. Options stay raw bytes (iterate them with
/// [`Options::new`]); build them with [`GeneveOption::emit`] or
/// [`emit_options`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GeneveRepr<'a> {
    /// 24-bit virtual network identifier.
    pub vni: u32,
    /// Payload protocol (0x6558 for Ethernet).
    pub protocol: EtherType,
    /// O: control packet, not to be forwarded as data.
    pub oam: bool,
    /// C: critical options present.
    pub critical: bool,
    /// The raw option area: a multiple of 4 bytes, at most 252.
    pub options: &'a [u8],
}

impl<'a> GeneveRepr<'a> {
    /// Parses a checked packet. Version != 0: `BadVersion`. Reserved bits
    /// are ignored as RFC 8926 §3.4 asks.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<GeneveRepr<'a>> {
        packet.check_len()?;
        if packet.version() != 0 {
            return Err(Error::BadVersion);
        }
        Ok(GeneveRepr {
            vni: packet.vni(),
            protocol: packet.protocol(),
            oam: packet.oam(),
            critical: packet.critical(),
            options: packet.options_bytes(),
        })
    }

    /// The options.
    pub fn options(&self) -> Options<'a> {
        Options::new(self.options)
    }

    /// Base header plus options.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN + self.options.len()
    }

    /// Same as `header_len`.
    pub const fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Writes the header and copies the options.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        debug_assert!(
            self.options.len() & 3 == 0 && self.options.len() <= MAX_HEADER_LEN - HEADER_LEN
        );
        packet.set_version_opt_len(0, (self.options.len() / 4) as u8);
        packet.set_flags(self.oam, self.critical);
        packet.set_protocol(self.protocol);
        packet.set_vni(self.vni & 0x00ff_ffff);
        packet.options_mut().copy_from_slice(self.options);
    }
}

impl fmt::Display for GeneveRepr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "geneve vni={} proto={}", self.vni, self.protocol)?;
        if self.oam {
            f.write_str(" oam")?;
        }
        if self.critical {
            f.write_str(" critical")?;
        }
        let n = self.options().count();
        if n > 0 {
            write!(f, " options={n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::test_vectors::hex;

    // From tests/vectors/gen_tunnels.py (scapy). tshark 4.0 on tunnels.pcap:
    // opts: geneve.vni 0x123456, geneve.flags.critical 1, option classes
    // 0x0102 and 0xffff, types 0x03 and 0x81 (option.type.critical 0, 1),
    // option lengths 8 and 12 bytes (20 in all); plain: vni 0x00002a,
    // critical 0, no options. Both carried Ethernet / IPv4 / ICMP.
    const OPTS: &str = include_str!("../tests/vectors/tunnel_geneve_opts.hex");
    const PLAIN: &str = include_str!("../tests/vectors/tunnel_geneve_plain.hex");

    #[test]
    fn two_options() {
        let bytes = hex(OPTS);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.version(), 0);
        assert_eq!(p.opt_len(), 5);
        assert!(!p.oam());
        assert!(p.critical());
        assert_eq!(p.reserved_flags(), 0);
        assert_eq!(p.protocol(), EtherType::TransparentEthernet);
        assert_eq!(p.vni(), 0x123456);
        assert_eq!(p.reserved(), 0);
        assert_eq!(p.header_len(), 28);
        assert!(p.has_critical_options());
        let opts: Vec<_> = p.options().map(|o| o.unwrap()).collect();
        let expect = [
            GeneveOption {
                class: 0x0102,
                typ: 0x03,
                data: &[0xaa, 0xbb, 0xcc, 0xdd],
            },
            GeneveOption {
                class: 0xffff,
                typ: 0x81,
                data: &[1, 2, 3, 4, 5, 6, 7, 8],
            },
        ];
        assert_eq!(opts, expect);
        assert!(!opts[0].critical() && opts[1].critical());
        assert_eq!(&p.payload()[..6], &[2, 0, 0, 0, 0, 0x0b]);

        let repr = GeneveRepr::parse(&p).unwrap();
        assert_eq!(repr.options, &bytes[8..28]);
        assert_eq!(
            repr.to_string(),
            "geneve vni=1193046 proto=0x6558 critical options=2"
        );

        // Emit from option reprs reproduces the bytes.
        let mut area = [0u8; 20];
        assert_eq!(emit_options(&expect, &mut area), 20);
        let repr2 = GeneveRepr {
            options: &area,
            ..repr
        };
        let mut out = vec![0xa5u8; repr2.buffer_len()];
        repr2.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes[..28]);
    }

    #[test]
    fn plain() {
        let bytes = hex(PLAIN);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        let repr = GeneveRepr::parse(&p).unwrap();
        assert_eq!(
            repr,
            GeneveRepr {
                vni: 42,
                protocol: EtherType::TransparentEthernet,
                oam: false,
                critical: false,
                options: &[]
            }
        );
        assert!(!p.has_critical_options());
        assert_eq!(p.options().count(), 0);
        let mut out = [0xa5u8; 8];
        repr.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes[..8]);
    }

    #[test]
    fn truncation_and_bad_options() {
        let bytes = hex(OPTS);
        for len in 0..28 {
            assert_eq!(
                Packet::new_checked(&bytes[..len]).err(),
                Some(Error::Truncated),
                "{len}"
            );
        }
        // Second option claims 3 words of data but only 2 remain.
        let mut b = bytes.clone();
        b[8 + 8 + 3] = 3;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::Malformed));
        let p = Packet::new_unchecked(&b[..]);
        let items: Vec<_> = p.options().collect();
        assert_eq!(items.len(), 2);
        assert_eq!(items[1], Err(Error::Malformed));
        // Version 1.
        let mut b = bytes.clone();
        b[0] |= 0x40;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(GeneveRepr::parse(&p), Err(Error::BadVersion));
    }

    fn arb_options() -> impl Strategy<Value = Vec<(u16, u8, Vec<u8>)>> {
        proptest::collection::vec(
            (
                any::<u16>(),
                any::<u8>(),
                (0usize..=8).prop_flat_map(|w| proptest::collection::vec(any::<u8>(), w * 4)),
            ),
            0..5,
        )
    }

    proptest! {
        #[test]
        fn prop_roundtrip(vni in 0u32..1 << 24, proto in any::<u16>(), oam in any::<bool>(),
                          opts in arb_options(), payload in proptest::collection::vec(any::<u8>(), 0..16)) {
            let opts: Vec<GeneveOption<'_>> =
                opts.iter().map(|(c, t, d)| GeneveOption { class: *c, typ: *t, data: d }).collect();
            let mut area = vec![0u8; opts.iter().map(|o| o.buffer_len()).sum()];
            emit_options(&opts, &mut area);
            let critical = opts.iter().any(|o| o.critical());
            let repr = GeneveRepr { vni, protocol: EtherType::from(proto), oam, critical, options: &area };
            let mut buf = vec![0u8; repr.buffer_len() + payload.len()];
            buf[repr.header_len()..].copy_from_slice(&payload);
            repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
            let p = Packet::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(GeneveRepr::parse(&p).unwrap(), repr);
            prop_assert_eq!(p.has_critical_options(), critical);
            let back: Vec<_> = p.options().map(|o| o.unwrap()).collect();
            prop_assert_eq!(back, opts);
            prop_assert_eq!(p.payload(), &payload[..]);
        }

        #[test]
        fn prop_no_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let u = Packet::new_unchecked(&bytes[..]);
            if bytes.len() >= HEADER_LEN {
                let _ = u.has_critical_options();
            }
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = (p.version(), p.opt_len(), p.oam(), p.critical(), p.protocol(), p.vni(),
                         p.reserved(), p.reserved_flags(), p.payload(), p.has_critical_options());
                for o in p.options() {
                    prop_assert!(o.is_ok());
                }
                if let Ok(r) = GeneveRepr::parse(&p) {
                    let _ = r.to_string();
                }
            }
        }
    }
}
