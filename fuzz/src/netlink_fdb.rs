//! The kernel's bridge FDB notifications as tep's EVPN thread reads them
//! (`tep_sys::netlink::decode_notifications`): any bytes as one netlink
//! datagram. Invariants:
//! - decoding never panics, and gives the same answer twice;
//! - every message is accounted for: a non-empty datagram yields at least
//!   one event or one skipped message, and malformed ones are among the
//!   skipped;
//! - an event's VTEP address is the length NDA_DST had (4 or 16 bytes),
//!   its MAC six bytes (the types say so), and no more events come out than
//!   the datagram has room for messages (16-byte header + 12-byte ndmsg).

use tep_sys::netlink::{decode_notifications, FdbEntry, FdbEvent};

/// The smallest neighbour message: nlmsghdr and ndmsg.
const MIN_MESSAGE: usize = 16 + 12;

pub fn netlink_fdb(data: &[u8]) {
    let mut events = Vec::new();
    let (skipped, malformed) = decode_notifications(data, &mut events);
    assert!(
        malformed <= skipped,
        "{malformed} malformed of {skipped} skipped"
    );
    if !data.is_empty() {
        assert!(
            !events.is_empty() || skipped > 0,
            "a datagram of {} bytes left no trace",
            data.len()
        );
    }
    assert!(events.len() <= data.len() / MIN_MESSAGE);
    let mut again = Vec::new();
    assert_eq!(decode_notifications(data, &mut again), (skipped, malformed));
    assert_eq!(events, again);
    for e in &events {
        let (FdbEvent::New(FdbEntry { mac, dst, .. }) | FdbEvent::Del(FdbEntry { mac, dst, .. })) =
            e;
        std::hint::black_box((mac, dst));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seeds are what the kernel sends, not noise the decoder skips.
    #[test]
    fn seeds_decode_as_the_kernel_meant() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/seeds/netlink_fdb/");
        let read = |name: &str| {
            let mut out = Vec::new();
            let counts =
                decode_notifications(&std::fs::read(format!("{dir}{name}")).unwrap(), &mut out);
            (out, counts)
        };
        let (ev, counts) = read("remote-mac");
        assert_eq!(counts, (0, 0));
        let FdbEvent::New(e) = ev[0] else {
            panic!("{ev:?}")
        };
        assert_eq!((e.ifindex, e.mac, e.flags), (5, [2, 0, 0, 0, 0, 1], 0x12));
        assert_eq!(e.dst, Some("192.0.2.2".parse().unwrap()));
        let (ev, _) = read("del-v6-port-vni");
        let FdbEvent::Del(e) = ev[0] else {
            panic!("{ev:?}")
        };
        assert_eq!((e.port, e.vni), (Some(4789), Some(300)));
        assert_eq!(e.dst, Some("2001:db8::9".parse().unwrap()));
        let (ev, counts) = read("two-and-arp");
        assert_eq!((ev.len(), counts), (1, (1, 0)), "the ARP entry is skipped");
    }
}
