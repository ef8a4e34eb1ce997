//! The Cause value (TS 29.244 §8.2.1): what a response says of a request,
//! and what an IE error (`ie::IeError`) answers with. Its own module so
//! that the IE codec and the leaf IEs (`types`, where its `Value` impl is)
//! both use it without importing each other.

use core::fmt;

/// A Cause value (§8.2.1, Table 8.2.1-1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Cause(pub u8);

impl Cause {
    pub const REQUEST_ACCEPTED: Cause = Cause(1);
    pub const REQUEST_REJECTED: Cause = Cause(64);
    pub const SESSION_CONTEXT_NOT_FOUND: Cause = Cause(65);
    pub const MANDATORY_IE_MISSING: Cause = Cause(66);
    pub const CONDITIONAL_IE_MISSING: Cause = Cause(67);
    pub const INVALID_LENGTH: Cause = Cause(68);
    pub const MANDATORY_IE_INCORRECT: Cause = Cause(69);
    pub const INVALID_FORWARDING_POLICY: Cause = Cause(70);
    pub const INVALID_F_TEID_ALLOCATION_OPTION: Cause = Cause(71);
    pub const NO_ESTABLISHED_PFCP_ASSOCIATION: Cause = Cause(72);
    pub const RULE_CREATION_MODIFICATION_FAILURE: Cause = Cause(73);
    pub const PFCP_ENTITY_IN_CONGESTION: Cause = Cause(74);
    pub const NO_RESOURCES_AVAILABLE: Cause = Cause(75);
    pub const SERVICE_NOT_SUPPORTED: Cause = Cause(76);
    pub const SYSTEM_FAILURE: Cause = Cause(77);

    /// Values 1..=63 accept (§8.2.1 NOTE 1).
    pub const fn is_acceptance(self) -> bool {
        self.0 >= 1 && self.0 < 64
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self.0 {
            1 => "Request accepted",
            64 => "Request rejected",
            65 => "Session context not found",
            66 => "Mandatory IE missing",
            67 => "Conditional IE missing",
            68 => "Invalid length",
            69 => "Mandatory IE incorrect",
            70 => "Invalid Forwarding Policy",
            71 => "Invalid F-TEID allocation option",
            72 => "No established PFCP Association",
            73 => "Rule creation/modification Failure",
            74 => "PFCP entity in congestion",
            75 => "No resources available",
            76 => "Service not supported",
            77 => "System failure",
            v => return write!(f, "cause {v}"),
        };
        f.write_str(s)
    }
}
