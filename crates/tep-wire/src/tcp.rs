//! TCP headers (RFC 9293 §3.1) as far as checksums, offload and GRO need
//! them, with a bounded iterator over options (RFC 9293 §3.2, RFC 7323,
//! RFC 2018).

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};
use core::ops::BitOr;

use tep_csum::Sum;

use crate::{get_u16, get_u32, set_u16, set_u32, Error, Result};

/// Field offsets in the header, public for the dataplane's fast paths,
/// which read and write them in place where a view would cost a check.
pub mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ_NUM: Range<usize> = 4..8;
    pub const ACK_NUM: Range<usize> = 8..12;
    /// Data offset (4 bits), reserved (3), NS/AE (1), then the 8 flag bits.
    pub const FLAGS: Range<usize> = 12..14;
    pub const WIN_SIZE: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;
/// Longest header: data offset 15.
pub const MAX_HEADER_LEN: usize = 60;
/// Offset of the checksum field (checksum offload's `csum_offset`).
pub const CHECKSUM_OFFSET: usize = field::CHECKSUM.start;

const PROTO_TCP: u8 = 6;

/// The TCP flag bits (including NS, RFC 3540, now AE), in their position
/// in the low 9 bits of bytes 12–13.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct TcpFlags(u16);

impl TcpFlags {
    /// FIN
    pub const FIN: TcpFlags = TcpFlags(0x001);
    /// SYN
    pub const SYN: TcpFlags = TcpFlags(0x002);
    /// RST
    pub const RST: TcpFlags = TcpFlags(0x004);
    /// PSH
    pub const PSH: TcpFlags = TcpFlags(0x008);
    /// ACK
    pub const ACK: TcpFlags = TcpFlags(0x010);
    /// URG
    pub const URG: TcpFlags = TcpFlags(0x020);
    /// ECE (RFC 3168)
    pub const ECE: TcpFlags = TcpFlags(0x040);
    /// CWR (RFC 3168)
    pub const CWR: TcpFlags = TcpFlags(0x080);
    /// NS (RFC 3540, historic; AE in AccECN)
    pub const NS: TcpFlags = TcpFlags(0x100);

    const NAMES: [(TcpFlags, &'static str); 9] = [
        (Self::FIN, "FIN"),
        (Self::SYN, "SYN"),
        (Self::RST, "RST"),
        (Self::PSH, "PSH"),
        (Self::ACK, "ACK"),
        (Self::URG, "URG"),
        (Self::ECE, "ECE"),
        (Self::CWR, "CWR"),
        (Self::NS, "NS"),
    ];

    /// No flags.
    pub const fn empty() -> TcpFlags {
        TcpFlags(0)
    }

    /// The flags in the low 9 bits of `bits`; other bits are dropped.
    pub const fn from_bits_truncate(bits: u16) -> TcpFlags {
        TcpFlags(bits & 0x1ff)
    }

    /// The raw bits.
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// Whether every flag in `other` is set.
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Sets the flags in `other`.
    pub fn insert(&mut self, other: TcpFlags) {
        self.0 |= other.0;
    }

    /// Clears the flags in `other`.
    pub fn remove(&mut self, other: TcpFlags) {
        self.0 &= !other.0;
    }
}

impl BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl fmt::Display for TcpFlags {
    /// `SYN,ACK`; `-` when empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("-");
        }
        let mut first = true;
        for (flag, name) in Self::NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str(",")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TcpFlags({self})")
    }
}

/// One TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// Kind 0: end of the option list; the rest is padding.
    EndOfList,
    /// Kind 1: padding between options.
    NoOperation,
    /// Kind 2: maximum segment size.
    MaxSegmentSize(u16),
    /// Kind 3: window scale shift (RFC 7323 §2).
    WindowScale(u8),
    /// Kind 4: SACK permitted (RFC 2018).
    SackPermitted,
    /// Kind 5: SACK blocks (left, right edges); up to 4 fit in 40 bytes.
    Sack([Option<(u32, u32)>; 4]),
    /// Kind 8: timestamps (RFC 7323 §3).
    Timestamps {
        /// TSval
        tsval: u32,
        /// TSecr
        tsecr: u32,
    },
    /// Any other kind, with its data (after kind and length).
    Unknown {
        /// Option kind.
        kind: u8,
        /// Option data.
        data: &'a [u8],
    },
}

/// Iterator over raw TCP options. Yields `Err(Malformed)` once (then stops)
/// for a length below 2, past the end, or wrong for a known kind; stops
/// after `EndOfList`. Each step consumes at least one byte, so it ends.
#[derive(Debug, Clone)]
pub struct TcpOptions<'a> {
    data: &'a [u8],
}

impl<'a> TcpOptions<'a> {
    /// Options from raw bytes (a header's `options()`).
    pub const fn new(data: &'a [u8]) -> TcpOptions<'a> {
        TcpOptions { data }
    }
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let data = self.data;
        let kind = *data.first()?;
        match kind {
            0 => {
                self.data = &[];
                return Some(Ok(TcpOption::EndOfList));
            }
            1 => {
                self.data = &data[1..];
                return Some(Ok(TcpOption::NoOperation));
            }
            _ => {}
        }
        let len = match data.get(1) {
            Some(&l) if l >= 2 && (l as usize) <= data.len() => l as usize,
            _ => {
                self.data = &[];
                return Some(Err(Error::Malformed));
            }
        };
        let body = &data[2..len];
        self.data = &data[len..];
        let opt = match (kind, len) {
            (2, 4) => TcpOption::MaxSegmentSize(get_u16(body, 0)),
            (3, 3) => TcpOption::WindowScale(body[0]),
            (4, 2) => TcpOption::SackPermitted,
            (5, _) if (len - 2) % 8 == 0 && len <= 34 => {
                let mut blocks = [None; 4];
                for (slot, b) in blocks.iter_mut().zip(body.chunks_exact(8)) {
                    *slot = Some((get_u32(b, 0), get_u32(b, 4)));
                }
                TcpOption::Sack(blocks)
            }
            (8, 10) => TcpOption::Timestamps {
                tsval: get_u32(body, 0),
                tsecr: get_u32(body, 4),
            },
            (2..=5 | 8, _) => {
                self.data = &[];
                return Some(Err(Error::Malformed));
            }
            _ => TcpOption::Unknown { kind, data: body },
        };
        Some(Ok(opt))
    }
}

packet_view! {
    /// A read/write view of a TCP segment. TCP has no length field: the
    /// buffer must be exactly the segment (the IP payload).
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks the fixed header fits (`Truncated`), data offset ≥ 5
    /// (`BadLength`), and the options fit (`Truncated`).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(Error::BadLength);
        }
        if hl > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SRC_PORT.start)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::DST_PORT.start)
    }

    /// Sequence number.
    #[inline]
    pub fn seq_number(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::SEQ_NUM.start)
    }

    /// Acknowledgment number (meaningful with ACK).
    #[inline]
    pub fn ack_number(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::ACK_NUM.start)
    }

    /// Header length in bytes (data offset × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        (self.buffer.as_ref()[field::FLAGS.start] >> 4) as usize * 4
    }

    /// The flag bits.
    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags::from_bits_truncate(get_u16(self.buffer.as_ref(), field::FLAGS.start))
    }

    /// The three reserved bits between data offset and NS.
    #[inline]
    pub fn reserved(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS.start] >> 1) & 0x7
    }

    /// Window (unscaled).
    #[inline]
    pub fn window_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::WIN_SIZE.start)
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// Urgent pointer.
    #[inline]
    pub fn urgent_pointer(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::URGENT.start)
    }

    /// The raw options.
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// An iterator over the options.
    #[inline]
    pub fn option_iter(&self) -> TcpOptions<'_> {
        TcpOptions::new(self.options())
    }

    /// The data after the header, to the end of the buffer.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    fn sums_to_ones(&self, pseudo: Sum) -> bool {
        pseudo.add(Sum::of(self.buffer.as_ref())).verifies()
    }

    /// Verifies the checksum with the IPv4 pseudo-header (length: the buffer).
    /// A buffer over 65535 bytes cannot be one IPv4 segment: it does not
    /// verify.
    #[inline]
    pub fn verify_checksum_v4(&self, src: &Ipv4Addr, dst: &Ipv4Addr) -> bool {
        let Ok(len) = u16::try_from(self.buffer.as_ref().len()) else {
            return false;
        };
        self.sums_to_ones(tep_csum::pseudo_header_v4(
            src.octets(),
            dst.octets(),
            PROTO_TCP,
            len,
        ))
    }

    /// Verifies the checksum with the IPv6 pseudo-header.
    #[inline]
    pub fn verify_checksum_v6(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        let len = self.buffer.as_ref().len() as u32;
        self.sums_to_ones(tep_csum::pseudo_header_v6(
            &src.octets(),
            &dst.octets(),
            PROTO_TCP,
            len,
        ))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the source port.
    #[inline]
    pub fn set_src_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::SRC_PORT.start, v);
    }

    /// Sets the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::DST_PORT.start, v);
    }

    /// Sets the sequence number.
    #[inline]
    pub fn set_seq_number(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::SEQ_NUM.start, v);
    }

    /// Sets the acknowledgment number.
    #[inline]
    pub fn set_ack_number(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::ACK_NUM.start, v);
    }

    /// Sets the data offset from a byte length (a multiple of 4, ≤ 60).
    #[inline]
    pub fn set_header_len(&mut self, len: usize) {
        let b = &mut self.buffer.as_mut()[field::FLAGS.start];
        *b = (*b & 0x0f) | (((len / 4) as u8) << 4);
    }

    /// Sets the flag bits, keeping data offset and reserved bits.
    #[inline]
    pub fn set_flags(&mut self, flags: TcpFlags) {
        let b = self.buffer.as_mut();
        let v = get_u16(b, field::FLAGS.start) & !0x1ff;
        set_u16(b, field::FLAGS.start, v | flags.bits());
    }

    /// Sets the window.
    #[inline]
    pub fn set_window_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::WIN_SIZE.start, v);
    }

    /// Sets the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM.start, v);
    }

    /// Sets the urgent pointer.
    #[inline]
    pub fn set_urgent_pointer(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::URGENT.start, v);
    }

    fn fill(&mut self, pseudo: Sum) {
        self.set_checksum(0);
        let c = pseudo.add(Sum::of(self.buffer.as_ref())).checksum();
        self.set_checksum(c);
    }

    /// Computes and writes the checksum with the IPv4 pseudo-header.
    #[inline]
    pub fn fill_checksum_v4(&mut self, src: &Ipv4Addr, dst: &Ipv4Addr) {
        let len = u16::try_from(self.buffer.as_ref().len()).expect("TCP segment length");
        self.fill(tep_csum::pseudo_header_v4(
            src.octets(),
            dst.octets(),
            PROTO_TCP,
            len,
        ));
    }

    /// Computes and writes the checksum with the IPv6 pseudo-header.
    #[inline]
    pub fn fill_checksum_v6(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let len = self.buffer.as_ref().len() as u32;
        self.fill(tep_csum::pseudo_header_v6(
            &src.octets(),
            &dst.octets(),
            PROTO_TCP,
            len,
        ));
    }

    /// The raw options, writable.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..hl]
    }

    /// The data after the header, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.buffer.as_mut()[hl..]
    }
}

/// The fields of a TCP header, options as the raw bytes they are on the
/// wire (a multiple of 4 bytes, at most 40).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpRepr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq_number: u32,
    /// Acknowledgment number, as on the wire (meaningful with ACK).
    pub ack_number: u32,
    /// Flags.
    pub flags: TcpFlags,
    /// Window (unscaled).
    pub window_len: u16,
    /// Checksum field: as read, or as emit writes it (0, a pseudo-header
    /// sum for offload, or a full checksum; else fill it after emit).
    pub checksum: u16,
    /// Urgent pointer.
    pub urgent_pointer: u16,
    /// Raw options (padded to 4 bytes).
    pub options: &'a [u8],
}

impl<'a> TcpRepr<'a> {
    /// Parses a checked segment. Options are not validated here (iterate
    /// them with [`TcpOptions`]); reserved bits are ignored.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<TcpRepr<'a>> {
        packet.check_len()?;
        let b: &'a [u8] = packet.buffer.as_ref();
        Ok(TcpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq_number: packet.seq_number(),
            ack_number: packet.ack_number(),
            flags: packet.flags(),
            window_len: packet.window_len(),
            checksum: packet.checksum(),
            urgent_pointer: packet.urgent_pointer(),
            options: &b[HEADER_LEN..packet.header_len()],
        })
    }

    /// Bytes [`TcpRepr::emit`] writes: 20 plus the options.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN + self.options.len()
    }

    /// Same as [`TcpRepr::header_len`].
    pub const fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Writes the header and options. Panics if the options are not a
    /// multiple of 4 bytes or longer than 40 (a caller bug).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        assert!(self.options.len() & 3 == 0 && self.options.len() <= MAX_HEADER_LEN - HEADER_LEN);
        let hl = self.header_len();
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq_number);
        packet.set_ack_number(self.ack_number);
        set_u16(
            packet.buffer.as_mut(),
            field::FLAGS.start,
            ((hl as u16 / 4) << 12) | self.flags.bits(),
        );
        packet.set_window_len(self.window_len);
        packet.set_checksum(self.checksum);
        packet.set_urgent_pointer(self.urgent_pointer);
        packet.buffer.as_mut()[HEADER_LEN..hl].copy_from_slice(self.options);
    }
}

impl fmt::Display for TcpRepr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tcp {} > {} [{}] seq {} ack {} win {}",
            self.src_port,
            self.dst_port,
            self.flags,
            self.seq_number,
            self.ack_number,
            self.window_len
        )?;
        if !self.options.is_empty() {
            write!(f, " opts {}B", self.options.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::test_vectors::hex;

    #[test]
    fn options_vector() {
        // tshark: tcp.options.mss_val 1460, wscale.shift 7, timestamp.tsval
        // 123456, sack_le 1000, tcp.checksum.status good.
        let bytes = hex(include_str!("../tests/vectors/base_eth_ipv4opt_tcpopt.hex"));
        let (src, dst) = (Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(198, 51, 100, 2));
        let seg = &bytes[14 + 24..];
        let p = Packet::new_checked(seg).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (40000, 443));
        assert_eq!((p.seq_number(), p.ack_number()), (0x01020304, 0x0a0b0c0d));
        assert_eq!(p.header_len(), 52);
        assert_eq!(p.flags(), TcpFlags::PSH | TcpFlags::ACK);
        assert_eq!(p.reserved(), 0);
        assert_eq!(p.window_len(), 502);
        assert_eq!(p.checksum(), 0x5936);
        assert_eq!(p.urgent_pointer(), 0);
        assert_eq!(p.payload(), b"hello tep");
        assert!(p.verify_checksum_v4(&src, &dst));
        assert!(!p.verify_checksum_v4(&src, &Ipv4Addr::new(198, 51, 100, 3)));
        let opts: Vec<_> = p.option_iter().map(|o| o.unwrap()).collect();
        assert_eq!(
            opts,
            [
                TcpOption::MaxSegmentSize(1460),
                TcpOption::NoOperation,
                TcpOption::WindowScale(7),
                TcpOption::SackPermitted,
                TcpOption::Timestamps {
                    tsval: 123456,
                    tsecr: 654321
                },
                TcpOption::NoOperation,
                TcpOption::NoOperation,
                TcpOption::Sack([Some((1000, 2000)), None, None, None]),
            ]
        );
        let r = TcpRepr::parse(&p).unwrap();
        assert_eq!(r.options.len(), 32);
        assert_eq!(
            r.to_string(),
            "tcp 40000 > 443 [PSH,ACK] seq 16909060 ack 168496141 win 502 opts 32B"
        );
        let mut out = seg.to_vec();
        out[..52].fill(0);
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, seg);
        // Emit with a zero checksum, then fill, reproduces it too.
        let mut q = Packet::new_unchecked(&mut out[..]);
        TcpRepr { checksum: 0, ..r }.emit(&mut q);
        q.fill_checksum_v4(&src, &dst);
        assert_eq!(out, seg);
        for n in 0..52 {
            assert_eq!(Packet::new_checked(&seg[..n]).err(), Some(Error::Truncated));
        }
    }

    #[test]
    fn v6_checksum_and_bad_offset() {
        let (s, d) = (Ipv6Addr::LOCALHOST, "2001:db8::9".parse().unwrap());
        let mut b = [0u8; 25];
        let mut p = Packet::new_unchecked(&mut b[..]);
        TcpRepr {
            src_port: 1,
            dst_port: 2,
            seq_number: 3,
            ack_number: 0,
            flags: TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR | TcpFlags::NS,
            window_len: 65535,
            checksum: 0,
            urgent_pointer: 0,
            options: &[],
        }
        .emit(&mut p);
        p.payload_mut().copy_from_slice(b"abcde");
        p.fill_checksum_v6(&s, &d);
        assert!(p.verify_checksum_v6(&s, &d));
        assert_eq!(p.flags().to_string(), "SYN,ECE,CWR,NS");
        let mut f = p.flags();
        f.remove(TcpFlags::NS);
        f.insert(TcpFlags::FIN);
        p.set_flags(f);
        assert_eq!(p.flags().to_string(), "FIN,SYN,ECE,CWR");
        assert!(!p.verify_checksum_v6(&s, &d));
        p.set_header_len(16);
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::BadLength));
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_header_len(28);
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::Truncated));
        assert_eq!(TcpFlags::empty().to_string(), "-");
    }

    #[test]
    fn option_errors() {
        let bad: [&[u8]; 6] = [
            &[2, 4, 5],          // past the end
            &[2, 3, 5],          // MSS with length 3
            &[30, 1],            // length below 2
            &[30],               // no length byte
            &[5, 6, 0, 0, 0, 0], // SACK not a multiple of 8
            &[8, 8, 0, 0, 0, 0, 0, 0],
        ];
        for o in bad {
            let v: Vec<_> = TcpOptions::new(o).collect();
            assert_eq!(v, [Err(Error::Malformed)], "{o:?}");
        }
        let v: Vec<_> = TcpOptions::new(&[1, 30, 3, 9, 0, 2, 4]).collect();
        assert_eq!(
            v,
            [
                Ok(TcpOption::NoOperation),
                Ok(TcpOption::Unknown {
                    kind: 30,
                    data: &[9]
                }),
                Ok(TcpOption::EndOfList),
            ]
        );
    }

    fn repr_strategy() -> impl Strategy<Value = (TcpRepr<'static>, Vec<u8>)> {
        (
            any::<(u16, u16, u32, u32)>(),
            0u16..0x200,
            any::<(u16, u16, u16)>(),
            0usize..=10,
            proptest::collection::vec(any::<u8>(), 40),
        )
            .prop_map(|((sp, dp, seq, ack), fl, (w, c, u), words, opts)| {
                (
                    TcpRepr {
                        src_port: sp,
                        dst_port: dp,
                        seq_number: seq,
                        ack_number: ack,
                        flags: TcpFlags::from_bits_truncate(fl),
                        window_len: w,
                        checksum: c,
                        urgent_pointer: u,
                        options: &[],
                    },
                    opts[..words * 4].to_vec(),
                )
            })
    }

    proptest! {
        #[test]
        fn round_trip((r, opts) in repr_strategy()) {
            let r = TcpRepr { options: &opts, ..r };
            let mut buf = [0u8; 60];
            let buf = &mut buf[..r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            let p = Packet::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(TcpRepr::parse(&p).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = Packet::new_checked(&b[..]) {
                let _ = (p.seq_number(), p.ack_number(), p.flags(), p.window_len(), p.reserved());
                let _ = (p.checksum(), p.urgent_pointer(), p.payload().len());
                let _ = p.verify_checksum_v4(&Ipv4Addr::LOCALHOST, &Ipv4Addr::LOCALHOST);
                let _ = p.verify_checksum_v6(&Ipv6Addr::LOCALHOST, &Ipv6Addr::LOCALHOST);
                prop_assert!(p.option_iter().count() <= p.options().len());
                let _ = TcpRepr::parse(&p);
            }
        }

        #[test]
        fn options_never_panic(b in proptest::collection::vec(any::<u8>(), 0..60)) {
            prop_assert!(TcpOptions::new(&b).count() <= b.len());
        }
    }

    #[test]
    fn oversized_buffer_does_not_verify_over_ipv4_and_does_not_panic() {
        // A GRO super-packet view can exceed what one IPv4 segment holds.
        let mut big = vec![0u8; 70_000];
        big[12] = 0x50;
        let p = Packet::new_checked(&big[..]).unwrap();
        let a = Ipv4Addr::new(10, 0, 0, 1);
        assert!(!p.verify_checksum_v4(&a, &a));
    }
}
