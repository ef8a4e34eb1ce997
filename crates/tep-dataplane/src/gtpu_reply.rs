//! The GTP-U reply plane of the receive path (TS 29.281 §7.2, §7.3): Echo
//! Responses, rate-limited Error Indications and Supported Extension
//! Headers Notifications, each an outer datagram back to the peer that
//! drew it. `gtpu-decap` decides when to answer; this module writes the
//! answers.

use crate::buffer::{ChecksumState, PacketId, Pool};
use crate::drop::DropReason;
use crate::io::Outer;
use crate::vector::PacketVector;
use core::net::IpAddr;
use tep_wire::gtpu::{self, GtpuRepr};
use tep_wire::udp;

/// The extension header types tep parses (and so may receive with the
/// comprehension-required bit).
const SUPPORTED_EXTENSIONS: [u8; 4] = [0x40, 0x82, 0x85, 0xc0];

/// The hop limit of replies.
const REPLY_TTL: u8 = 64;

/// Rate limit for generated packets (GTP-U Error Indications): a token
/// bucket of one second's worth.
#[derive(Clone, Copy, Debug)]
pub struct RateLimit {
    per_second: u32,
    tokens: u32,
    last_ns: u64,
}

impl RateLimit {
    /// At most `per_second`, in bursts of at most `per_second`.
    pub fn new(per_second: u32) -> RateLimit {
        RateLimit {
            per_second,
            tokens: per_second,
            last_ns: 0,
        }
    }

    /// Whether one more may go at time `now_ns`.
    pub fn allow(&mut self, now_ns: u64) -> bool {
        if self.per_second == 0 {
            return false;
        }
        let elapsed = now_ns.saturating_sub(self.last_ns);
        let refill = elapsed.saturating_mul(u64::from(self.per_second)) / 1_000_000_000;
        if refill > 0 {
            self.tokens = (u64::from(self.tokens) + refill).min(u64::from(self.per_second)) as u32;
            self.last_ns = now_ns;
        }
        if self.tokens > 0 {
            self.tokens -= 1;
            true
        } else {
            false
        }
    }
}

/// GTP-U signalling from a UPF's peers that the control plane acts on
/// (path supervision, TS 29.281 §7.2.1 and §7.3.1), handed up from the
/// receive path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerSignal {
    /// An Error Indication from `from`: the peer at `peer` had no context
    /// for `teid`, a TEID a session's downlink sends it.
    ErrorIndication {
        from: IpAddr,
        peer: IpAddr,
        teid: u32,
    },
    /// An Echo Response from `from` to port 2152 (the control plane sends
    /// its Echo Requests from a port of its own, as §4.4.2.1 allows; a peer
    /// that answers to 2152 anyway is heard here).
    EchoResponse { from: IpAddr, sequence: u16 },
}

/// Signals a worker holds between two collections by the control plane:
/// a stranger can send Error Indications at line rate, so past this many
/// they are counted and dropped.
pub const SIGNALS: usize = 32;

/// The signals of one worker, a fixed array: queued on the receive path
/// without allocating.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Signals {
    items: [Option<PeerSignal>; SIGNALS],
    len: usize,
    /// Signals that found the array full since the last collection.
    dropped: u64,
}

impl Signals {
    fn new() -> Signals {
        Signals {
            items: [None; SIGNALS],
            len: 0,
            dropped: 0,
        }
    }

    fn push(&mut self, s: PeerSignal) {
        match self.items.get_mut(self.len) {
            Some(slot) => {
                *slot = Some(s);
                self.len += 1;
            }
            None => self.dropped += 1,
        }
    }

    /// Moves the signals into `out`; returns how many were dropped since
    /// the last call.
    pub fn take(&mut self, out: &mut Vec<PeerSignal>) -> u64 {
        out.extend(self.items[..self.len].iter().flatten());
        self.len = 0;
        core::mem::take(&mut self.dropped)
    }
}

/// Where replies go while a vector is decapsulated, and how many.
#[derive(Debug)]
pub(crate) struct Replies<'a> {
    /// Outer packets to send back.
    pub out: &'a mut PacketVector,
    /// Requests answered in place (their buffer became the reply).
    pub answered: u64,
    /// Packets generated (new buffers).
    pub generated: u64,
}

/// One end of a reply: address and UDP port.
pub(crate) type Endpoint = (IpAddr, u16);

/// GTP-U state of the receive path: what it answers with and how often.
#[derive(Clone, Debug)]
pub(crate) struct GtpuResponder {
    /// Restart counter for the Recovery IE.
    restart_counter: u8,
    /// Error Indications and Supported Extension Headers Notifications.
    limit: RateLimit,
    /// Sequence number of the next generated message.
    sequence: u16,
    /// Notices the rate limit held back.
    pub suppressed: u64,
    /// A UPF's peers' signalling, for its control plane (boxed: rarely
    /// touched, it stays out of the pipeline's lines).
    pub signals: Box<Signals>,
}

impl GtpuResponder {
    /// A responder with the Recovery restart counter and the rate of
    /// generated messages per second.
    pub fn new(restart_counter: u8, per_second: u32) -> GtpuResponder {
        GtpuResponder {
            restart_counter,
            limit: RateLimit::new(per_second),
            sequence: 0,
            suppressed: 0,
            signals: Box::new(Signals::new()),
        }
    }

    /// Turns the Echo Request at offset `at` of `id` into its Echo
    /// Response, in place, along `path` (TS 29.281 §7.2.2).
    pub fn answer_echo(
        &self,
        pool: &mut Pool,
        id: PacketId,
        at: usize,
        path: ReplyPath,
        replies: &mut Replies<'_>,
    ) -> Result<(), DropReason> {
        let request = gtpu::Packet::new_unchecked(&pool.data(id)[at..]);
        let resp = GtpuRepr::echo_response_for(&request, self.restart_counter)?;
        let ReplyPath {
            local,
            peer,
            headers,
        } = path;
        if !write_datagram(pool, id, local, peer, &resp, headers) || replies.out.push(id).is_err() {
            return Err(DropReason::NoBuffer);
        }
        replies.answered += 1;
        Ok(())
    }

    /// Tells the peer what drew no answer of its own, in a message of a
    /// buffer of its own, at most the rate limit's per second: an Error
    /// Indication for a G-PDU to a TEID no tunnel has (TS 29.281 §7.3.1:
    /// naming the TEID and our address, to the sender's address at port
    /// 2152), or the extension headers we understand to a sender of one we
    /// must and do not (§7.3.2).
    pub fn notify(
        &mut self,
        pool: &mut Pool,
        replies: &mut Replies<'_>,
        notice: Notice,
        path: ReplyPath,
        now_ns: u64,
    ) {
        if !self.limit.allow(now_ns) {
            self.suppressed += 1;
            return;
        }
        let seq = self.sequence;
        let (repr, to) = match notice {
            Notice::UnknownTeid(teid) => (
                GtpuRepr::error_indication(seq, teid, path.local.0, None),
                (path.peer.0, gtpu::UDP_PORT),
            ),
            Notice::UnsupportedExtension => {
                match GtpuRepr::supported_extension_headers(seq, &SUPPORTED_EXTENSIONS) {
                    Ok(r) => (r, path.peer),
                    Err(_) => return,
                }
            }
        };
        self.sequence = seq.wrapping_add(1);
        generate(pool, replies, &repr, path.local, to, path.headers);
    }
}

impl GtpuResponder {
    /// Hands an Error Indication or Echo Response that `from` sent up to
    /// the control plane; other messages, and ones that do not parse, are
    /// not.
    pub fn signal(&mut self, message: &gtpu::Packet<&[u8]>, from: IpAddr) {
        // A flood costs no parsing once the array is full.
        if self.signals.len == SIGNALS {
            self.signals.dropped += 1;
            return;
        }
        let Ok(r) = GtpuRepr::parse(message) else {
            return;
        };
        let s = match r.message {
            gtpu::GtpuMessage::ErrorIndication {
                teid_data_i, peer, ..
            } => PeerSignal::ErrorIndication {
                from,
                peer,
                teid: teid_data_i,
            },
            gtpu::GtpuMessage::EchoResponse { .. } => PeerSignal::EchoResponse {
                from,
                sequence: r.sequence.unwrap_or(0),
            },
            _ => return,
        };
        self.signals.push(s);
    }

    /// An End Marker from `local` to `peer` with the peer's `teid`: the
    /// last packet of a session on its old path (TS 29.281 §7.3.2, sent
    /// when the SMF modifies the session with SNDEM). Not rate-limited: the
    /// control plane asks for each.
    pub fn end_marker(
        &mut self,
        pool: &mut Pool,
        replies: &mut Replies<'_>,
        local: IpAddr,
        peer: IpAddr,
        teid: u32,
        headers: bool,
    ) {
        let repr = GtpuRepr {
            message: tep_wire::gtpu::GtpuMessage::EndMarker,
            ..GtpuRepr::gpdu(teid)
        };
        let (local, to) = ((local, gtpu::UDP_PORT), (peer, gtpu::UDP_PORT));
        generate(pool, replies, &repr, local, to, headers);
    }
}

/// What a generated message tells the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Notice {
    /// A G-PDU came to this TEID, which no tunnel has.
    UnknownTeid(u32),
    /// A G-PDU carried an extension header we must understand and do not.
    UnsupportedExtension,
}

/// Where a reply goes: from `local` back to `peer`, with the outer headers
/// in the buffer where tep writes them (`headers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReplyPath {
    pub local: Endpoint,
    pub peer: Endpoint,
    pub headers: bool,
}

/// A reply in a buffer of its own, counted as generated.
fn generate(
    pool: &mut Pool,
    replies: &mut Replies<'_>,
    repr: &GtpuRepr,
    local: Endpoint,
    to: Endpoint,
    headers: bool,
) {
    let Some(id) = pool.alloc() else {
        return;
    };
    if write_datagram(pool, id, local, to, repr, headers) && replies.out.push(id).is_ok() {
        replies.generated += 1;
    } else {
        pool.free(id);
    }
}

/// Replaces the contents of `id` with the GTP-U message `repr` from `src`
/// to `dst`: `meta.outer` says where it goes, and, where tep writes the
/// outer headers (`headers`), an IPv4/IPv6 + UDP header with a full UDP
/// checksum goes in front. TTL 64. False when the families differ or it
/// does not fit.
fn write_datagram(
    pool: &mut Pool,
    id: PacketId,
    src: Endpoint,
    dst: Endpoint,
    repr: &GtpuRepr,
    headers: bool,
) -> bool {
    if src.0.is_ipv4() != dst.0.is_ipv4() {
        return false;
    }
    let outer = Outer {
        src: src.0,
        dst: dst.0,
        src_port: src.1,
        dst_port: dst.1,
        tos: 0,
        ttl: REPLY_TTL,
    };
    let mut b = [0u8; 512];
    let body_len = repr.buffer_len();
    let hdr = match headers {
        true => match outer.emit(body_len, &mut b) {
            Some(n) => n,
            None => return false,
        },
        false => 0,
    };
    let total = hdr + body_len;
    if total > b.len() {
        return false;
    }
    repr.emit(&mut b[hdr..total], 0);
    if headers {
        let mut u = udp::Packet::new_unchecked(&mut b[hdr - udp::HEADER_LEN..total]);
        match (src.0, dst.0) {
            (IpAddr::V4(s), IpAddr::V4(d)) => u.fill_checksum_v4(&s, &d),
            (IpAddr::V6(s), IpAddr::V6(d)) => u.fill_checksum_v6(&s, &d),
            _ => return false,
        }
    }
    if !pool.fill(id, &b[..total]) {
        return false;
    }
    *pool.outer_mut(id) = outer;
    let m = pool.meta_mut(id);
    m.udp_payload = hdr as u16;
    m.by_socket = !headers;
    m.l3 = 0;
    m.l4 = hdr.saturating_sub(udp::HEADER_LEN) as u16;
    m.csum = ChecksumState::None;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_limit_refills_per_second_up_to_a_burst() {
        let mut r = RateLimit::new(2);
        assert!(r.allow(0) && r.allow(0));
        assert!(!r.allow(1), "the burst is spent");
        assert!(r.allow(600_000_000), "one more after half a second");
        assert!(!r.allow(600_000_001));
        assert!(r.allow(10_000_000_000) && r.allow(10_000_000_000));
        assert!(!r.allow(10_000_000_000), "refill stops at the burst");
        assert!(!RateLimit::new(0).allow(u64::MAX), "0 means none");
    }

    #[test]
    fn signals_are_bounded_and_taken_whole() {
        let mut g = GtpuResponder::new(0, 10);
        let from = IpAddr::from([192, 0, 2, 2]);
        let mut b = [0u8; 64];
        let ei = GtpuRepr::error_indication(1, 0x100, from, None);
        ei.emit(&mut b, 0);
        let msg = gtpu::Packet::new_unchecked(&b[..ei.buffer_len()]);
        for _ in 0..SIGNALS + 3 {
            g.signal(&msg, from);
        }
        let echo = GtpuRepr {
            message: gtpu::GtpuMessage::EchoResponse { recovery: 0 },
            ..GtpuRepr::error_indication(9, 0, from, None)
        };
        echo.emit(&mut b, 0);
        g.signal(&gtpu::Packet::new_unchecked(&b[..echo.buffer_len()]), from);
        let mut out = Vec::new();
        assert_eq!(g.signals.take(&mut out), 4, "past the array: dropped");
        assert_eq!(out.len(), SIGNALS);
        let want = PeerSignal::ErrorIndication {
            from,
            peer: from,
            teid: 0x100,
        };
        assert_eq!(out[0], want);
        out.clear();
        g.signal(&gtpu::Packet::new_unchecked(&b[..echo.buffer_len()]), from);
        g.signal(&gtpu::Packet::new_unchecked(&b[..3]), from);
        assert_eq!(g.signals.take(&mut out), 0);
        let echo = PeerSignal::EchoResponse { from, sequence: 9 };
        assert_eq!(out, [echo], "a truncated message is not handed up");
    }

    #[test]
    fn replies_are_whole_checksummed_datagrams() {
        let mut pool = Pool::new(2, 2048);
        let id = pool.alloc().unwrap();
        let repr = GtpuRepr::error_indication(7, 99, IpAddr::from([192, 0, 2, 1]), None);
        let local = (IpAddr::from([192, 0, 2, 1]), 2152);
        let peer = (IpAddr::from([192, 0, 2, 2]), 2152);
        assert!(write_datagram(&mut pool, id, local, peer, &repr, true));
        let d = pool.data(id);
        let ip = tep_wire::ipv4::Packet::new_checked(d).unwrap();
        assert!(ip.verify_checksum());
        let u = udp::Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(
            u.verify_checksum_v4(&ip.src_addr(), &ip.dst_addr()),
            udp::ChecksumStatus::Valid
        );
        let g = gtpu::Packet::new_checked(u.payload()).unwrap();
        assert_eq!(GtpuRepr::parse(&g).unwrap(), repr);
        assert_eq!(pool.outer(id).dst, peer.0);
        let other = ("::1".parse().unwrap(), 1);
        assert!(!write_datagram(&mut pool, id, local, other, &repr, true));
        // Where a socket writes the headers: the message alone.
        assert!(write_datagram(&mut pool, id, local, peer, &repr, false));
        let g = gtpu::Packet::new_checked(pool.data(id)).unwrap();
        assert_eq!(GtpuRepr::parse(&g).unwrap(), repr);
        assert_eq!(
            (pool.outer(id).src, pool.meta(id).udp_payload),
            (local.0, 0)
        );
    }
}
