//! What tep refuses of a session request before building its rules: the
//! IEs its decoder noted and does not apply ([`Skipped`]), the message
//! flags it does not act on. TS 29.244 draws the line this
//! follows:
//!
//! - An IE of a type the receiver does not know at all is silently
//!   discarded and the message processed (§7.6.1: forward
//!   compatibility). tep knows the Release 15 types ([`IeType::KNOWN_MAX`]);
//!   above them it discards, and counts ([`Counter::UnknownIe`]).
//! - An IE tep knows but does not apply is never accepted: inside a rule
//!   (Create/Update PDR, FAR, QER, URR, BAR and their PDI and Forwarding
//!   Parameters) it fails the rule: "Rule creation/modification Failure"
//!   with the Failed Rule ID, which §7.5.3.1 and §7.5.5.1 ask for with that
//!   cause, and the Offending IE naming the IE. Outside the rules (Update
//!   BAR, Create Traffic Endpoint, User Plane Inactivity Timer, Trace
//!   Information…) there is no rule to name: "Service not supported" with
//!   the Offending IE. The request is refused whole and the session is
//!   left as it was (tep does not do partial acceptance, PSUCC).
//!
//! Which children each group applies is its `ies!` declaration in
//! [`crate::rules`]: one list, the decoder's; the values of those it
//! applies are checked where they are applied ([`super::session`]).

use crate::ie::{IeType, Skipped};
use crate::message::{SessionEstablishmentRequest, SessionModificationRequest};
use crate::rules::*;
use crate::types::{Cause, FailedRuleId, PfcpsmReqFlags};

use super::session::Reject;
use super::Counter;

/// A rule group: the ID a refusal names, and what it and its nested
/// groups skipped.
trait Rule {
    fn failed_rule(&self) -> FailedRuleId;
    fn skipped(&self) -> Skipped;
}

macro_rules! rule {
    ($($t:ty => $id:ident($f:ident) $(, $nested:ident)?;)+) => {$(
        impl Rule for $t {
            fn failed_rule(&self) -> FailedRuleId {
                FailedRuleId::$id(self.$f.0)
            }
            fn skipped(&self) -> Skipped {
                let s = self.skipped;
                $(let s = self.$nested.join(s);)?
                s
            }
        }
    )+};
}

/// A nested group's record joined to its parent's.
trait Nested {
    fn join(&self, s: Skipped) -> Skipped;
}

impl Nested for Pdi {
    fn join(&self, s: Skipped) -> Skipped {
        s.and(&self.skipped)
    }
}

impl<T: Nested> Nested for Option<T> {
    fn join(&self, s: Skipped) -> Skipped {
        self.as_ref().map_or(s, |n| n.join(s))
    }
}

impl Nested for ForwardingParameters {
    fn join(&self, s: Skipped) -> Skipped {
        s.and(&self.skipped)
    }
}

impl Nested for UpdateForwardingParameters {
    fn join(&self, s: Skipped) -> Skipped {
        s.and(&self.skipped)
    }
}

rule! {
    CreatePdr => Pdr(pdr_id), pdi;
    UpdatePdr => Pdr(pdr_id), pdi;
    CreateFar => Far(far_id), forwarding_parameters;
    UpdateFar => Far(far_id), update_forwarding_parameters;
    CreateQer => Qer(qer_id);
    UpdateQer => Qer(qer_id);
    CreateUrr => Urr(urr_id);
    UpdateUrr => Urr(urr_id);
    CreateBar => Bar(bar_id);
    UpdateBar => Bar(bar_id);
}

/// The rules of `list`: the first that skipped a known IE is refused; the
/// unknown IEs are added to `unknown`.
fn rules<T: Rule>(list: &[T], unknown: &mut u32) -> Result<(), Reject> {
    for r in list {
        let s = r.skipped();
        *unknown += u32::from(s.unknown);
        if let Some(ie) = s.first() {
            return Err(Reject::unsupported(r.failed_rule(), ie));
        }
    }
    Ok(())
}

/// An IE of the message itself tep does not apply.
fn message(s: &Skipped, unknown: &mut u32) -> Result<(), Reject> {
    *unknown += u32::from(s.unknown);
    match s.first() {
        Some(ie) => Err(Reject::simple(
            Cause::SERVICE_NOT_SUPPORTED,
            Some(ie),
            Counter::UnsupportedIe,
        )),
        None => Ok(()),
    }
}

/// What an establishment asks that tep does not do, and how many unknown
/// IEs it carried (discarded either way).
pub fn establishment(m: &SessionEstablishmentRequest) -> (Result<(), Reject>, u32) {
    let mut unknown = 0;
    let r = (|| {
        message(&m.skipped, &mut unknown)?;
        rules(&m.create_pdrs, &mut unknown)?;
        rules(&m.create_fars, &mut unknown)?;
        rules(&m.create_urrs, &mut unknown)?;
        rules(&m.create_qers, &mut unknown)?;
        rules(&m.create_bars, &mut unknown)
    })();
    (r, unknown)
}

/// The message flags a modification may carry: QUARR (report every URR)
/// and DROBU (drop the packets held for the session). SNDEM belongs in a
/// FAR's Update Forwarding Parameters.
const MODIFICATION_FLAGS: u8 = PfcpsmReqFlags::QUARR | PfcpsmReqFlags::DROBU;

/// The same of a modification.
pub fn modification(m: &SessionModificationRequest) -> (Result<(), Reject>, u32) {
    let mut unknown = 0;
    let r = (|| {
        message(&m.skipped, &mut unknown)?;
        if m.flags.is_some_and(|f| f.0 & !MODIFICATION_FLAGS != 0) {
            return Err(Reject::simple(
                Cause::SERVICE_NOT_SUPPORTED,
                Some(IeType::PFCPSMREQ_FLAGS),
                Counter::UnsupportedIe,
            ));
        }
        rules(&m.create_pdrs, &mut unknown)?;
        rules(&m.create_fars, &mut unknown)?;
        rules(&m.create_urrs, &mut unknown)?;
        rules(&m.create_qers, &mut unknown)?;
        rules(&m.update_pdrs, &mut unknown)?;
        rules(&m.update_fars, &mut unknown)?;
        rules(&m.update_urrs, &mut unknown)?;
        rules(&m.update_qers, &mut unknown)?;
        rules(&m.create_bars, &mut unknown)?;
        rules(m.update_bar.as_slice(), &mut unknown)
    })();
    (r, unknown)
}
