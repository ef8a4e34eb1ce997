//! What a UP function tells its SMFs about GTP-U paths (TS 29.244 §5.12):
//! a peer that stopped answering Echo Requests and came back (Node Report
//! Request, §7.4.5.1) and an Error Indication a peer sent for a TEID of a
//! session (Session Report Request, §7.5.8.4).

use crate::ie::{IeError, IeType, Reader, Value, Writer};
use crate::types::FTeid;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Node Report Type (§8.2.69): [`NodeReportType::UPFR`],
/// [`NodeReportType::UPRR`], … (flags, the spare bits dropped).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct NodeReportType(pub u8);

impl Value for NodeReportType {
    const TYPE: IeType = IeType::NODE_REPORT_TYPE;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        r.u8().map(|v| NodeReportType(v & 0x3f))
    }
    fn emit(&self, w: &mut Writer<'_>) {
        w.u8(self.0 & 0x3f);
    }
}

impl NodeReportType {
    /// User Plane Path Failure Report.
    pub const UPFR: u8 = 0x01;
    /// User Plane Path Recovery Report (Release 16).
    pub const UPRR: u8 = 0x02;
}

/// Remote GTP-U Peer (§8.2.70): the address of a peer whose path failed or
/// recovered. tep writes the address alone; the Destination Interface and
/// Network Instance a sender may add (DI, NI) are read past.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct RemoteGtpuPeer {
    pub v4: Option<Ipv4Addr>,
    pub v6: Option<Ipv6Addr>,
}

const RP_V6: u8 = 0x01;
const RP_V4: u8 = 0x02;

impl RemoteGtpuPeer {
    /// The peer at `a`.
    pub fn of(a: IpAddr) -> RemoteGtpuPeer {
        match a {
            IpAddr::V4(a) => RemoteGtpuPeer {
                v4: Some(a),
                v6: None,
            },
            IpAddr::V6(a) => RemoteGtpuPeer {
                v4: None,
                v6: Some(a),
            },
        }
    }
}

impl Value for RemoteGtpuPeer {
    const TYPE: IeType = IeType::REMOTE_GTP_U_PEER;
    fn parse(r: &mut Reader<'_>) -> Result<Self, IeError> {
        let flags = r.u8()?;
        let v4 = if flags & RP_V4 != 0 {
            Some(r.ipv4()?)
        } else {
            None
        };
        let v6 = if flags & RP_V6 != 0 {
            Some(r.ipv6()?)
        } else {
            None
        };
        if v4.is_none() && v6.is_none() {
            return Err(r.incorrect());
        }
        r.rest();
        Ok(RemoteGtpuPeer { v4, v6 })
    }
    fn emit(&self, w: &mut Writer<'_>) {
        w.u8(if self.v4.is_some() { RP_V4 } else { 0 } | if self.v6.is_some() { RP_V6 } else { 0 });
        if let Some(a) = self.v4 {
            w.ipv4(a);
        }
        if let Some(a) = self.v6 {
            w.ipv6(a);
        }
    }
}

ies! {
    /// User Plane Path Failure Report (Table 7.4.5.1.2-1): the peers whose
    /// path failed.
    pub struct UserPlanePathFailureReport = USER_PLANE_PATH_FAILURE_REPORT {
        some remote_gtp_u_peers: RemoteGtpuPeer,
    }
}

ies! {
    /// User Plane Path Recovery Report (Table 7.4.5.1.3-1): the peers whose
    /// failed path answers again.
    pub struct UserPlanePathRecoveryReport = USER_PLANE_PATH_RECOVERY_REPORT {
        some remote_gtp_u_peers: RemoteGtpuPeer,
    }
}

ies! {
    /// Error Indication Report (Table 7.5.8.4-1): the F-TEIDs of the peer
    /// that sent an Error Indication (its address and the TEID it did not
    /// know).
    pub struct ErrorIndicationReport = ERROR_INDICATION_REPORT {
        some remote_f_teids: FTeid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ie::Writer;

    fn round_trip<V: Value + PartialEq + core::fmt::Debug>(v: &V) -> Vec<u8> {
        let mut b = Vec::new();
        Writer::new(&mut b).ie(v);
        assert_eq!(&V::from_ie(&b[4..]).unwrap(), v);
        b
    }

    #[test]
    fn remote_peers_round_trip_and_skip_what_follows() {
        let v4 = RemoteGtpuPeer::of("192.0.2.7".parse().unwrap());
        assert_eq!(round_trip(&v4), [0, 103, 0, 5, 0x02, 192, 0, 2, 7]);
        let v6 = RemoteGtpuPeer::of("2001:db8::7".parse().unwrap());
        assert_eq!(round_trip(&v6).len(), 4 + 17);
        // DI (octet 5 bit 3) with its length and value after the address.
        let with_di = [0x06, 192, 0, 2, 7, 0, 1, 0];
        assert_eq!(RemoteGtpuPeer::from_ie(&with_di).unwrap(), v4);
        assert!(RemoteGtpuPeer::from_ie(&[0x00]).is_err(), "no address");
        assert!(RemoteGtpuPeer::from_ie(&[0x02, 192, 0]).is_err(), "short");
    }

    #[test]
    fn reports_round_trip() {
        let peers = vec![
            RemoteGtpuPeer::of("192.0.2.7".parse().unwrap()),
            RemoteGtpuPeer::of("2001:db8::7".parse().unwrap()),
        ];
        round_trip(&UserPlanePathFailureReport {
            remote_gtp_u_peers: peers.clone(),
        });
        let b = round_trip(&UserPlanePathRecoveryReport {
            remote_gtp_u_peers: peers,
        });
        assert_eq!(&b[..2], &187u16.to_be_bytes());
        round_trip(&ErrorIndicationReport {
            remote_f_teids: vec![FTeid::Assigned {
                teid: 0x1234,
                v4: Some("192.0.2.7".parse().unwrap()),
                v6: None,
            }],
        });
        assert!(ErrorIndicationReport::from_ie(&[]).is_err(), "none given");
        round_trip(&NodeReportType(NodeReportType::UPRR));
    }
}
