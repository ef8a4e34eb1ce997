//! Why a packet was dropped. One enum for the whole dataplane, so that every
//! counter, metric label and log line uses the same names.

tep_named::named_enum! {
    /// A named, counted reason for dropping a packet.
    pub enum DropReason {
        /// No buffer was free in the pool.
        NoBuffer => "no_buffer",
        /// A header ended before its length (outer or inner).
        Truncated => "truncated",
        /// A length field contradicts the packet.
        BadLength => "bad_length",
        /// A version field this endpoint does not speak.
        BadVersion => "bad_version",
        /// A header with forbidden bits or values.
        Malformed => "malformed",
        /// A header feature tep does not implement.
        Unsupported => "unsupported",
        /// Not IPv4 or IPv6 where an IP packet was expected.
        NotIp => "not_ip",
        /// A datagram to a UDP port no tunnel listens on.
        UnknownPort => "unknown_port",
        /// From a source address that is not the tunnel's configured peer.
        WrongPeer => "wrong_peer",
        /// A VNI no tunnel is configured with.
        UnknownVni => "unknown_vni",
        /// A GTP-U TEID no tunnel is configured with.
        UnknownTeid => "unknown_teid",
        /// A GRE key no tunnel is configured with.
        UnknownKey => "unknown_key",
        /// An inner packet no tunnel routes (no prefix or MAC matched).
        NoRoute => "no_route",
        /// Overlay: a frame from a network's local side to a MAC its FDB
        /// has on that side (a bridge there flooded it to every port).
        LocalMac => "local_mac",
        /// Overlay, gateway mode: a frame from the inner interface whose
        /// 802.1Q VLAN (or its absence) is no network's.
        UnknownVlan => "unknown_vlan",
        /// UPF: a packet to a UE address no session has (downlink).
        NoSession => "no_session",
        /// UPF: a downlink packet to a UE address that no session of the
        /// data network it came from has, but one of another network
        /// does: it came in on the wrong network's N6 device.
        WrongNetwork => "wrong_network",
        /// UPF: an uplink G-PDU of a session's TEID whose QFI no PDR of
        /// the session matches (no Error Indication: the TEID is known,
        /// TS 29.281 §7.3.1).
        NoPdr => "no_pdr",
        /// UPF: a packet of a session with several rules that way (PDRs
        /// with SDF filters) that none of them takes.
        NoPdrMatch => "no_pdr_match",
        /// UPF: the session's FAR drops it (apply action DROP, or FORW
        /// without outer header creation yet).
        SessionDrop => "session_drop",
        /// UPF: a URR's volume or time quota of the session is used up
        /// (TS 29.244 §5.2.2.2: forwarding stops until the SMF grants
        /// more).
        QuotaExhausted => "quota_exhausted",
        /// UPF: the session buffers, and its buffer (or the worker's) is
        /// full.
        BufferFull => "buffer_full",
        /// UPF: a packet held for the session dropped at the SMF's asking
        /// (DROBU in a Session Modification Request) instead of sent.
        BufferDropped => "buffer_dropped",
        /// UPF: an uplink G-PDU whose inner source is not its session's UE
        /// address or prefix (IP address spoofing prevention, TS 23.501
        /// §5.8.2.x), or whose session names no UE address.
        UeSourceSpoofed => "ue_source_spoofed",
        /// UPF (`n3_source_check`): an uplink G-PDU from an address other
        /// than its session's gNB (the downlink FAR's peer).
        GnbSourceMismatch => "gnb_source_mismatch",
        /// UPF: over the maximum bit rate of the session's QER that way
        /// (its MBR, or the session AMBR), TS 29.244 §5.4.2.
        MbrExceeded => "mbr_exceeded",
        /// The outer UDP checksum did not verify.
        BadChecksum => "bad_checksum",
        /// A zero UDP checksum over IPv6 on a tunnel that does not allow it
        /// (RFC 6935/6936).
        ZeroChecksum => "zero_checksum",
        /// Remote checksum offload that cannot be applied (offset out of the
        /// packet, or RCO not enabled on the tunnel).
        BadRemoteChecksum => "bad_remote_checksum",
        /// A GTP-U extension header whose type says it must be understood.
        UnknownRequiredExtension => "unknown_required_extension",
        /// A Geneve option marked critical that tep does not understand.
        UnknownCriticalOption => "unknown_critical_option",
        /// A GUE control message (counted; tep answers none).
        GueControl => "gue_control",
        /// A Geneve control (O bit) message: RFC 8926 §3.4 forbids forwarding
        /// its payload, and tep answers none.
        GeneveControl => "geneve_control",
        /// An IP fragment where a whole packet is needed.
        Fragment => "fragment",
        /// The encapsulated packet would exceed the path MTU with DF set.
        TooBig => "too_big",
        /// The outer IPv4 header checksum did not verify.
        BadIpChecksum => "bad_ip_checksum",
        /// An outer packet that is not UDP on the tunnel input.
        NotUdp => "not_udp",
        /// A GTP-U signalling message that ends here (Echo Response, End
        /// Marker, Error Indication, Supported Extension Headers Notification):
        /// counted, not forwarded.
        GtpuSignalling => "gtpu_signalling",
        /// RFC 6040 §4.2: outer CE over an inner Not-ECT packet must be dropped.
        EcnCeNotEct => "ecn_ce_not_ect",
        /// Remote checksum offload from a peer the tunnel does not accept it
        /// from (`remote_checksum_rx` off).
        RemoteChecksumOff => "remote_checksum_off",
        /// A forwarded IP packet whose TTL / hop limit ran out (RFC 791,
        /// RFC 8200): tep routes as a router in gateway mode.
        TtlExpired => "ttl_expired",
        /// I/O: a virtio-net header tep cannot honour.
        BadVnetHeader => "bad_vnet_header",
        /// I/O: the socket's send queue stayed full (EAGAIN), or the send
        /// failed.
        SendFailed => "send_failed",
        /// I/O: the UDP socket refused GSO (the train is lost; GSO is off from
        /// then on).
        GsoRefused => "gso_refused",
        /// I/O: writing to the TUN/TAP failed.
        DeviceWrite => "device_write",
        /// I/O: an inner packet for a kind whose device is not open.
        NoDevice => "no_device",
        /// I/O: an AF_XDP transmit ring stayed full.
        TxRingFull => "tx_ring_full",
        /// I/O: a frame received in more AF_XDP descriptors (multi-buffer)
        /// than a buffer holds.
        FrameTooLong => "frame_too_long",
        /// A node's output vector was full: a bug (it panics in debug
        /// builds), counted on the path's first node in release.
        VectorFull => "vector_full",
    }
}

impl DropReason {
    /// The reasons the I/O layers around the pipeline drop for (their own
    /// counters, beside the nodes'): host mode's reads and writes, gateway
    /// mode's rings.
    pub const IO: &'static [DropReason] = &[
        DropReason::BadVnetHeader,
        DropReason::NoBuffer,
        DropReason::SendFailed,
        DropReason::GsoRefused,
        DropReason::DeviceWrite,
        DropReason::NoDevice,
        DropReason::TxRingFull,
        DropReason::FrameTooLong,
    ];
}

/// A counter per drop reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropCounts([u64; DropReason::COUNT]);

impl Default for DropCounts {
    // By hand: arrays have `Default` only up to 32 entries.
    fn default() -> Self {
        DropCounts::ZERO
    }
}

impl core::ops::Index<DropReason> for DropCounts {
    type Output = u64;
    fn index(&self, r: DropReason) -> &u64 {
        &self.0[r as usize]
    }
}

impl core::ops::IndexMut<DropReason> for DropCounts {
    fn index_mut(&mut self, r: DropReason) -> &mut u64 {
        &mut self.0[r as usize]
    }
}

impl DropCounts {
    /// No drops.
    pub const ZERO: DropCounts = DropCounts([0; DropReason::COUNT]);

    /// All drops counted.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The reasons counted at least once, with their counts.
    pub fn nonzero(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL
            .iter()
            .map(|&r| (r, self[r]))
            .filter(|&(_, n)| n > 0)
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &DropCounts) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a += b;
        }
    }
}

impl From<tep_wire::Error> for DropReason {
    fn from(e: tep_wire::Error) -> DropReason {
        match e {
            tep_wire::Error::Truncated => DropReason::Truncated,
            tep_wire::Error::BadLength => DropReason::BadLength,
            tep_wire::Error::BadVersion => DropReason::BadVersion,
            tep_wire::Error::Malformed => DropReason::Malformed,
            tep_wire::Error::Unsupported => DropReason::Unsupported,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_snake_case_and_indexes_dense() {
        let mut seen = std::collections::HashSet::new();
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i, "counter index of {r}");
            assert!(seen.insert(r.name()), "duplicate name {}", r.name());
            assert!(r.name().chars().all(|c| c.is_ascii_lowercase() || c == '_'));
        }
        assert_eq!(DropReason::COUNT, seen.len());
    }

    #[test]
    fn wire_errors_map_to_their_own_reasons() {
        use tep_wire::Error;
        let all = [
            Error::Truncated,
            Error::BadLength,
            Error::BadVersion,
            Error::Malformed,
            Error::Unsupported,
        ];
        let mapped: std::collections::HashSet<_> =
            all.iter().map(|&e| DropReason::from(e)).collect();
        assert_eq!(mapped.len(), all.len());
        for e in all {
            assert_eq!(DropReason::from(e).name(), e.name());
        }
    }
}
