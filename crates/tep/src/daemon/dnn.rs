//! Several data networks (`[[pfcp.network]]`): the one a session's rules
//! name. A session is in one data network: its downlink PDRs match UE
//! addresses there, its uplink FAR forwards into that network's N6
//! device. Its Network Instances (TS 29.244 §8.2.4; read as
//! [`NetworkName`] says: DNS labels or text, without case) must all name
//! it: a name no network has, or a second network within one session, is
//! refused by the rule that gives it (Rule creation/modification Failure,
//! Failed Rule ID, Offending IE Network Instance), never mapped to
//! another network. A session that names none is in the first network.
//! With the one unnamed network (no `[[pfcp.network]]`) every name is it.

use tep_pfcp::node::{Refused, Rules};
use tep_pfcp::types::{FailedRuleId, NetworkName};
use tep_pfcp::IeType;

/// The data networks' names, by index (the dataplane's network number);
/// `[None]`: the one unnamed network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Networks(Vec<Option<String>>);

impl Default for Networks {
    fn default() -> Self {
        Networks(vec![None])
    }
}

impl Networks {
    /// `[pfcp]`'s networks (at most `MAX_DATA_NETWORKS`, which the
    /// dataplane's network numbers hold).
    pub fn of(config: &tep_config::PfcpConfig) -> Networks {
        Networks(config.networks.iter().map(|n| n.name.clone()).collect())
    }

    /// The network a Network Instance names.
    fn index(&self, name: &NetworkName) -> Option<u8> {
        if let [None] = self.0.as_slice() {
            return Some(0);
        }
        let i = self
            .0
            .iter()
            .position(|n| n.as_deref().is_some_and(|n| name.is(n)))?;
        u8::try_from(i).ok()
    }

    /// The data network of a session's `rules`, or the rule refused.
    pub fn of_session(&self, rules: &Rules) -> Result<u8, Refused> {
        let named = rules
            .pdrs
            .iter()
            .map(|p| (FailedRuleId::Pdr(p.id), p.network))
            .chain(
                rules
                    .fars
                    .iter()
                    .map(|f| (FailedRuleId::Far(f.id), f.network)),
            );
        let mut session = None;
        for (rule, name) in named {
            let Some(name) = name else { continue };
            let refused = Refused::rule(rule, Some(IeType::NETWORK_INSTANCE));
            let n = self.index(&name).ok_or(refused)?;
            if *session.get_or_insert(n) != n {
                return Err(refused);
            }
        }
        Ok(session.unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::upf::tests::{rules, N3};
    use crate::daemon::upf::UpfPlane;
    use tep_dataplane::session::control::Sessions;
    use tep_dataplane::session::SessionTable;
    use tep_pfcp::node::{self, Change, UserPlane};

    fn named(names: &[&str]) -> Networks {
        Networks(names.iter().map(|n| Some(n.to_string())).collect())
    }

    /// `rules` with Network Instance `pdr` on the downlink PDR (2) and
    /// `far` on the uplink FAR (1), as octets on the wire.
    fn session(pdr: Option<&[u8]>, far: Option<&[u8]>) -> Rules {
        let mut r = rules(node::Action::Forward);
        r.pdrs[1].network = pdr.map(NetworkName::of);
        r.fars[0].network = far.map(NetworkName::of);
        r
    }

    #[test]
    fn network_instances_select_one_configured_network() {
        let n = named(&["internet", "ims"]);
        let refused = |rule| Err(Refused::rule(rule, Some(IeType::NETWORK_INSTANCE)));
        assert_eq!(
            n.of_session(&session(None, None)),
            Ok(0),
            "none named: the first"
        );
        assert_eq!(n.of_session(&session(Some(b"\x03ims"), None)), Ok(1));
        assert_eq!(n.of_session(&session(None, Some(b"IMS"))), Ok(1));
        assert_eq!(
            n.of_session(&session(Some(b"\x08internet"), Some(b"internet"))),
            Ok(0)
        );
        // Never mapped to another network: a name none has, two networks.
        assert_eq!(
            n.of_session(&session(Some(b"\x03iot"), None)),
            refused(FailedRuleId::Pdr(2))
        );
        assert_eq!(
            n.of_session(&session(None, Some(b"internet2"))),
            refused(FailedRuleId::Far(1))
        );
        assert_eq!(
            n.of_session(&session(Some(b"\x03ims"), Some(b"\x08internet"))),
            refused(FailedRuleId::Far(1))
        );
        // The one unnamed network is every name.
        let one = Networks::default();
        assert_eq!(
            one.of_session(&session(Some(b"\x03iot"), Some(b"x"))),
            Ok(0)
        );
    }

    /// Two sessions with the same UE address, one per network, each found
    /// in its own network; a third with an unknown name changes nothing.
    #[test]
    fn the_same_ue_in_two_networks() {
        let (sessions, links) = Sessions::new(16, 1, vec![false]);
        let mut worker = SessionTable::new(links[0].clone());
        let mut up =
            UpfPlane::new(sessions, vec![(N3, 0)]).with_networks(named(&["internet", "ims"]));
        let internet = session(Some(b"\x08internet"), Some(b"\x08internet"));
        let mut ims = session(Some(b"\x03ims"), Some(b"\x03ims"));
        ims.pdrs[0].local.as_mut().unwrap().teid = 0x56;
        up.apply(Change::Install {
            seid: 1,
            rules: &internet,
        })
        .unwrap();
        up.apply(Change::Install {
            seid: 2,
            rules: &ims,
        })
        .unwrap();
        let mut iot = session(Some(b"\x03iot"), None);
        iot.pdrs[0].local.as_mut().unwrap().teid = 0x57;
        assert_eq!(
            up.apply(Change::Install {
                seid: 3,
                rules: &iot
            }),
            Err(Refused::rule(
                FailedRuleId::Pdr(2),
                Some(IeType::NETWORK_INSTANCE)
            ))
        );
        up.publish();
        worker.apply_pending(&mut Vec::new());
        let (a, b) = (
            worker.uplink(0x55, None).unwrap(),
            worker.uplink(0x56, None).unwrap(),
        );
        assert_ne!(a, b);
        assert_eq!(worker.uplink(0x57, None), None);
        assert_eq!((worker.get(a).network, worker.get(b).network), (0, 1));
        for (network, slot) in [(0, a), (1, b)] {
            worker.set_network(network);
            assert_eq!(worker.downlink(false, 0x0a2d_0007), Some(slot));
        }
    }
}
