//! The fuzz body of tep-pfcp's Flow Description parser (target
//! `flow_description`): any bytes in; what it accepts is within the
//! subset's bounds and reads back the same from its canonical text.

use tep_pfcp::flow::{Address, FlowDescription, MAX_PORT_RANGES};

/// The body.
pub fn flow_description(data: &[u8]) {
    let Ok(d) = FlowDescription::parse(data) else {
        return;
    };
    for side in [&d.from, &d.to] {
        assert!(side.ports.len() <= MAX_PORT_RANGES, "{d:?}");
        assert!(side.ports.iter().all(|&(a, b)| a <= b), "{d:?}");
        if let Address::Prefix(ip, len) = side.addr {
            assert!(len <= if ip.is_ipv6() { 128 } else { 32 }, "{d:?}");
        }
    }
    let text = d.to_string();
    let again = FlowDescription::parse(text.as_bytes());
    assert_eq!(again.as_ref(), Ok(&d), "{text}");
}
