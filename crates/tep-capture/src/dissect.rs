//! The layer walk behind `tep decode`.

use crate::ports::{PortMap, TunnelKind};
use crate::{Frame, Link};
use serde_json::{json, Value};
use tep_csum::Sum;
use tep_wire::ethernet::{self, EtherType};
use tep_wire::gue::{GueFields, GueRepr, RemoteChecksum};
use tep_wire::{
    geneve, gre, gtpu, gue, icmpv4, icmpv6, ipv4, ipv6, tcp, udp, vxlan, Error, IpProtocol,
};

/// One dissected layer: its name and its fields, in display order.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    /// `ethernet`, `ipv4`, `udp`, `vxlan`, …
    pub name: &'static str,
    /// Field name and value; numbers are JSON numbers.
    pub fields: Vec<(&'static str, Value)>,
}

impl Layer {
    fn new(name: &'static str) -> Layer {
        Layer {
            name,
            fields: Vec::new(),
        }
    }

    fn with(mut self, key: &'static str, value: impl Into<Value>) -> Layer {
        self.fields.push((key, value.into()));
        self
    }

    fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        self.fields.push((key, value.into()));
    }
}

/// Where dissection stopped early, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerError {
    /// The layer that could not be parsed.
    pub layer: &'static str,
    /// The tep-wire error name (`truncated`, `bad_length`, …).
    pub reason: &'static str,
    /// A human-readable message.
    pub error: String,
}

/// The result of dissecting one frame.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Dissection {
    /// Layers from the outside in.
    pub layers: Vec<Layer>,
    /// The error that ended the walk, if any.
    pub error: Option<LayerError>,
}

/// Deepest nesting followed (a tunnel in a tunnel in a tunnel…), so that a
/// crafted packet cannot make the walk loop.
const MAX_DEPTH: usize = 16;

/// The addresses a transport checksum's pseudo-header needs.
#[derive(Debug, Clone, Copy)]
enum IpContext {
    V4(ipv4::Ipv4Repr),
    V6(ipv6::Ipv6Repr),
}

impl IpContext {
    fn pseudo_header(&self, protocol: IpProtocol, length: usize) -> Sum {
        match self {
            IpContext::V4(r) => r.pseudo_header(protocol, length as u16),
            IpContext::V6(r) => r.pseudo_header(protocol, length as u32),
        }
    }
}

/// A remote checksum offload announced by a tunnel header, waiting for the
/// inner transport header it applies to. Offsets are absolute in the frame.
#[derive(Debug, Clone, Copy)]
struct PendingRco {
    start: usize,
    field: usize,
    end: usize,
}

struct Walker<'a> {
    ports: &'a PortMap,
    /// The frame, padded with zeros to its original length when the snap
    /// length cut it, so that every length field stays consistent.
    buf: &'a [u8],
    /// Bytes actually captured.
    captured: usize,
    out: Dissection,
    rco: Option<PendingRco>,
    /// UDP checksums that did not verify as captured: (layer index, range,
    /// pseudo-header sum), re-checked once inner partial checksums are known.
    unverified_udp: Vec<(usize, usize, usize, Sum)>,
    /// Inner checksum fields captured partial: (offset, as captured, complete).
    completions: Vec<(usize, u16, u16)>,
    depth: usize,
}

/// Dissects one frame.
pub fn dissect(frame: &Frame, ports: &PortMap) -> Dissection {
    let mut buf = frame.data.clone();
    let captured = buf.len();
    // A 64 KiB GSO super-packet can be captured with an original length
    // above what any length field can describe; pad no further than that.
    let padded = frame.orig_len.clamp(captured, captured.max(256 * 1024));
    buf.resize(padded, 0);
    let end = buf.len();
    let mut w = Walker {
        ports,
        buf: &buf,
        captured,
        out: Dissection::default(),
        rco: None,
        unverified_udp: Vec::new(),
        completions: Vec::new(),
        depth: 0,
    };
    match frame.link {
        Link::Ethernet => w.ethernet(0, end),
        Link::RawIp => w.ip_by_version(0, end),
        Link::Other(n) => w.fail("frame", Error::Unsupported, format!("link type {n}")),
    }
    w.recheck_local_checksum_offload();
    w.out
}

type Step = Result<(), ()>;

impl Walker<'_> {
    fn push(&mut self, layer: Layer) {
        self.out.layers.push(layer);
    }

    fn fail(&mut self, layer: &'static str, e: Error, detail: String) {
        let error = if detail.is_empty() {
            e.to_string()
        } else {
            format!("{e}: {detail}")
        };
        self.out.error = Some(LayerError {
            layer,
            reason: e.name(),
            error,
        });
    }

    /// Records a parse error for `layer`. A truncation caused by the snap
    /// length is not an error of the packet: it only ends the walk.
    fn check<T>(
        &mut self,
        layer: &'static str,
        at: usize,
        r: tep_wire::Result<T>,
    ) -> Result<T, ()> {
        r.map_err(|e| {
            if e == Error::Truncated && at >= self.captured {
                return;
            }
            self.fail(layer, e, String::new())
        })
    }

    /// Enters a layer and checks its view: None (the failure recorded) when
    /// the nesting is too deep or the header does not hold.
    fn open<P>(&mut self, layer: &'static str, at: usize, view: tep_wire::Result<P>) -> Option<P> {
        self.enter().ok()?;
        self.check(layer, at, view).ok()
    }

    /// Stops at a header that lies beyond the captured bytes.
    fn captured_at(&self, at: usize) -> bool {
        at < self.captured
    }

    fn enter(&mut self) -> Step {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            self.fail(
                "frame",
                Error::Unsupported,
                format!("more than {MAX_DEPTH} nested layers"),
            );
            return Err(());
        }
        Ok(())
    }

    /// Reports a checksum that covers `buf[from..to]` plus `extra` (a
    /// pseudo-header sum): `valid` when it verifies; `partial` when the
    /// field holds just the pseudo-header sum, as an OS leaves it for the
    /// NIC (captures taken on the sending host); `unverifiable` when the
    /// snap length cut the covered bytes.
    fn checksum_status(&self, from: usize, to: usize, extra: Sum, field: usize) -> &'static str {
        if to > self.captured {
            return "unverifiable";
        }
        if Sum::of(&self.buf[from..to]).add(extra).verifies() {
            return "valid";
        }
        let value = u16::from_be_bytes([self.buf[field], self.buf[field + 1]]);
        if value == extra.value() && extra != Sum::ZERO {
            return "partial";
        }
        "invalid"
    }

    fn ethernet(&mut self, at: usize, end: usize) {
        let buf = self.buf;
        let Some(p) = self.open("ethernet", at, ethernet::Packet::new_checked(&buf[at..end]))
        else {
            return;
        };
        let mut l = Layer::new("ethernet")
            .with("src", p.src_addr().to_string())
            .with("dst", p.dst_addr().to_string());
        let vlans: Vec<Value> = (0..p.tag_count())
            .filter_map(|i| p.vlan_tag(i))
            .map(|t| json!({"vid": t.vid(), "pcp": t.pcp(), "dei": t.dei()}))
            .collect();
        if !vlans.is_empty() {
            l.set("vlan", vlans);
        }
        let ethertype = p.ethertype();
        l.set("ethertype", ethertype.to_string());
        let next = at + p.header_len();
        self.push(l);
        self.by_ethertype(ethertype, next, end);
    }

    fn by_ethertype(&mut self, t: EtherType, at: usize, end: usize) {
        if !self.captured_at(at) {
            return;
        }
        match t {
            EtherType::Ipv4 => self.ipv4(at, end),
            EtherType::Ipv6 => self.ipv6(at, end),
            EtherType::TransparentEthernet => self.ethernet(at, end),
            EtherType::Arp => self.push(Layer::new("arp")),
            other => self.push(Layer::new("data").with("ethertype", other.to_string())),
        }
    }

    fn ip_by_version(&mut self, at: usize, end: usize) {
        if !self.captured_at(at) {
            return;
        }
        match self.buf[at] >> 4 {
            4 => self.ipv4(at, end),
            6 => self.ipv6(at, end),
            v => self.fail("ip", Error::BadVersion, format!("version nibble {v}")),
        }
    }

    fn ipv4(&mut self, at: usize, end: usize) {
        let buf = self.buf;
        let Some(p) = self.open("ipv4", at, ipv4::Packet::new_checked(&buf[at..end])) else {
            return;
        };
        let Ok(repr) = self.check("ipv4", at, ipv4::Ipv4Repr::parse(&p)) else {
            return;
        };
        let hl = p.header_len();
        let csum_ok = if p.verify_checksum() {
            "valid"
        } else {
            "invalid"
        };
        let mut l = Layer::new("ipv4")
            .with("src", repr.src_addr.to_string())
            .with("dst", repr.dst_addr.to_string())
            .with("proto", u8::from(repr.protocol))
            .with("ttl", repr.ttl)
            .with("dscp", repr.dscp)
            .with("ecn", repr.ecn)
            .with("id", repr.ident)
            .with("df", repr.dont_frag)
            .with("length", p.total_len())
            .with(
                "checksum",
                json!({"value": p.checksum(), "status": csum_ok}),
            );
        let fragment = repr.more_frags || repr.frag_offset != 0;
        if fragment {
            l.set(
                "fragment",
                json!({"offset": repr.frag_offset, "more": repr.more_frags}),
            );
        }
        self.push(l);
        let payload_end = at + p.total_len() as usize;
        if repr.frag_offset != 0 {
            return; // not the first fragment: no transport header here
        }
        self.transport(
            repr.protocol,
            IpContext::V4(repr),
            at + hl,
            payload_end,
            fragment,
        );
    }

    fn ipv6(&mut self, at: usize, end: usize) {
        let buf = self.buf;
        let Some(p) = self.open("ipv6", at, ipv6::Packet::new_checked(&buf[at..end])) else {
            return;
        };
        let Ok(repr) = self.check("ipv6", at, ipv6::Ipv6Repr::parse(&p)) else {
            return;
        };
        let upper = p.upper_layer();
        let mut l = Layer::new("ipv6")
            .with("src", repr.src_addr.to_string())
            .with("dst", repr.dst_addr.to_string())
            .with("next_header", u8::from(repr.next_header))
            .with("hop_limit", repr.hop_limit)
            .with("traffic_class", repr.traffic_class)
            .with("flow_label", repr.flow_label)
            .with("payload_length", p.payload_len());
        let payload_at = at + ipv6::HEADER_LEN;
        let payload_end = payload_at + p.payload_len() as usize;
        let Ok(upper) = self.check("ipv6", payload_at, upper) else {
            self.push(l);
            return;
        };
        if upper.protocol != repr.next_header {
            l.set("upper_proto", u8::from(upper.protocol));
        }
        if let Some(f) = upper.fragment {
            l.set(
                "fragment",
                json!({"offset": f.offset, "more": f.more_frags, "id": f.ident}),
            );
        }
        self.push(l);
        if upper.fragment.is_some_and(|f| f.offset != 0) {
            return;
        }
        let fragment = upper.fragment.is_some();
        let l4 = payload_at + upper.offset;
        self.transport(
            upper.protocol,
            IpContext::V6(repr),
            l4,
            payload_end,
            fragment,
        );
    }

    /// What follows an IP header.
    fn transport(&mut self, proto: IpProtocol, ip: IpContext, at: usize, end: usize, frag: bool) {
        if !self.captured_at(at) {
            return;
        }
        match proto {
            IpProtocol::Udp => self.udp(ip, at, end, frag),
            IpProtocol::Tcp => self.tcp(ip, at, end, frag),
            IpProtocol::Icmp => self.icmpv4(at, end),
            IpProtocol::Icmpv6 => self.icmpv6(ip, at, end),
            IpProtocol::Ipv4 => self.ipv4(at, end),
            IpProtocol::Ipv6 => self.ipv6(at, end),
            IpProtocol::Gre => self.gre(at, end),
            other => self.push(Layer::new("data").with("proto", u8::from(other))),
        }
    }

    fn gre(&mut self, at: usize, end: usize) {
        let buf = self.buf;
        let Some(p) = self.open("gre", at, gre::Packet::new_checked(&buf[at..end])) else {
            return;
        };
        let Ok(repr) = self.check("gre", at, gre::GreRepr::parse(&p)) else {
            return;
        };
        let mut l = Layer::new("gre").with("protocol", repr.protocol.to_string());
        if let Some(c) = p.checksum() {
            let status = if end > self.captured {
                "unverifiable"
            } else if p.verify_checksum() {
                "valid"
            } else {
                "invalid"
            };
            l.set("checksum", json!({"value": c, "status": status}));
        }
        if let Some(k) = repr.key {
            l.set("key", k);
        }
        if let Some(s) = repr.sequence {
            l.set("sequence", s);
        }
        let next = at + p.header_len();
        self.push(l);
        self.by_ethertype(repr.protocol, next, end);
    }

    /// A transport checksum over `buf[at..end]`, with a pending remote
    /// checksum offload applied when it points at this header's field.
    fn transport_checksum(
        &mut self,
        ip: IpContext,
        proto: IpProtocol,
        at: usize,
        end: usize,
        field: usize,
        frag: bool,
    ) -> Value {
        let value = u16::from_be_bytes([self.buf[field], self.buf[field + 1]]);
        if frag {
            return json!({"value": value, "status": "unverifiable"});
        }
        let pseudo = ip.pseudo_header(proto, end - at);
        if let Some(rco) = self.rco.take_if(|r| r.field == field) {
            // RCO: the sender left the pseudo-header sum; the receiver writes
            // the complement of the sum from `start` to the end of the packet.
            if rco.end > self.captured {
                return json!({"value": value, "status": "rco", "completed": null});
            }
            let payload_sum = Sum::of(&self.buf[rco.start..rco.end]);
            let completed = payload_sum.checksum();
            let mut copy = self.buf[at..end].to_vec();
            let rel = field - at;
            copy[rel..rel + 2].copy_from_slice(&completed.to_be_bytes());
            let ok = Sum::of(&copy).add(pseudo).verifies();
            return json!({"value": value, "status": "rco", "completed": completed,
                          "completed_status": if ok { "valid" } else { "invalid" }});
        }
        let status = self.checksum_status(at, end, pseudo, field);
        if status == "partial" {
            let mut copy = self.buf[at..end].to_vec();
            let rel = field - at;
            copy[rel..rel + 2].fill(0);
            let complete = Sum::of(&copy).add(pseudo);
            let complete = if proto == IpProtocol::Udp {
                complete.udp_checksum()
            } else {
                complete.checksum()
            };
            self.completions.push((field, value, complete));
        }
        json!({"value": value, "status": status})
    }

    /// A sender using local checksum offload computes the outer UDP
    /// checksum as if the inner checksum were already filled in; a capture
    /// taken on that sender holds the inner one still partial. Such an outer
    /// checksum is reported `lco`: valid once the inner one is completed.
    fn recheck_local_checksum_offload(&mut self) {
        for &(layer, from, to, pseudo) in &self.unverified_udp {
            let mut sum = Sum::of(&self.buf[from..to]).add(pseudo);
            let mut adjusted = false;
            for &(field, old, new) in &self.completions {
                if (from..to).contains(&field) {
                    let pos = field - from;
                    sum = sum
                        .sub(Sum::from_value(old).at(pos))
                        .add(Sum::from_value(new).at(pos));
                    adjusted = true;
                }
            }
            if adjusted && sum.verifies() {
                if let Some((_, Value::Object(c))) = self.out.layers[layer]
                    .fields
                    .iter_mut()
                    .find(|(k, _)| *k == "checksum")
                {
                    c.insert("status".into(), Value::String("lco".into()));
                }
            }
        }
    }

    fn udp(&mut self, ip: IpContext, at: usize, end: usize, frag: bool) {
        let buf = self.buf;
        let Ok(p) = self.check("udp", at, udp::Packet::new_checked(&buf[at..end])) else {
            return;
        };
        let (sport, dport, len) = (p.src_port(), p.dst_port(), p.len() as usize);
        let udp_end = at + len;
        let checksum = if p.checksum_zero() {
            json!({"value": 0, "status": "zero"})
        } else {
            let field = at + udp::CHECKSUM_OFFSET;
            self.transport_checksum(ip, IpProtocol::Udp, at, udp_end, field, frag)
        };
        if checksum["status"] == "invalid" {
            let pseudo = ip.pseudo_header(IpProtocol::Udp, len);
            self.unverified_udp
                .push((self.out.layers.len(), at, udp_end, pseudo));
        }
        let kind = self.ports.lookup(sport, dport);
        let l = Layer::new("udp")
            .with("src_port", sport)
            .with("dst_port", dport)
            .with("length", len)
            .with("checksum", checksum);
        self.push(l);
        let payload = at + udp::HEADER_LEN;
        if frag || !self.captured_at(payload) {
            return;
        }
        match kind {
            Some(k) => self.tunnel(k, payload, udp_end),
            None if udp_end > payload => {
                self.push(Layer::new("data").with("length", udp_end - payload))
            }
            None => {}
        }
    }

    fn tcp(&mut self, ip: IpContext, at: usize, end: usize, frag: bool) {
        let buf = self.buf;
        let Ok(p) = self.check("tcp", at, tcp::Packet::new_checked(&buf[at..end])) else {
            return;
        };
        let field = at + tcp::CHECKSUM_OFFSET;
        let checksum = self.transport_checksum(ip, IpProtocol::Tcp, at, end, field, frag);
        let l = Layer::new("tcp")
            .with("src_port", p.src_port())
            .with("dst_port", p.dst_port())
            .with("seq", p.seq_number())
            .with("ack", p.ack_number())
            .with("flags", p.flags().to_string())
            .with("window", p.window_len())
            .with("payload_length", end - at - p.header_len())
            .with("checksum", checksum);
        self.push(l);
    }

    fn icmpv4(&mut self, at: usize, end: usize) {
        let buf = self.buf;
        let Ok(p) = self.check("icmpv4", at, icmpv4::Packet::new_checked(&buf[at..end])) else {
            return;
        };
        let status = if end > self.captured {
            "unverifiable"
        } else if p.verify_checksum() {
            "valid"
        } else {
            "invalid"
        };
        let mut l = Layer::new("icmpv4")
            .with("type", p.msg_type())
            .with("code", p.code())
            .with("checksum", json!({"value": p.checksum(), "status": status}));
        if let Ok(icmpv4::Icmpv4Repr::FragNeeded { next_hop_mtu }) = icmpv4::Icmpv4Repr::parse(&p) {
            l.set("mtu", next_hop_mtu);
        }
        self.push(l);
    }

    fn icmpv6(&mut self, ip: IpContext, at: usize, end: usize) {
        let buf = self.buf;
        let Ok(p) = self.check("icmpv6", at, icmpv6::Packet::new_checked(&buf[at..end])) else {
            return;
        };
        let status = match ip {
            _ if end > self.captured => "unverifiable",
            IpContext::V6(r) if p.verify_checksum(&r.src_addr, &r.dst_addr) => "valid",
            _ => "invalid",
        };
        let mut l = Layer::new("icmpv6")
            .with("type", p.msg_type())
            .with("code", p.code())
            .with("checksum", json!({"value": p.checksum(), "status": status}));
        if let Ok(icmpv6::Icmpv6Repr::PacketTooBig { mtu }) = icmpv6::Icmpv6Repr::parse(&p) {
            l.set("mtu", mtu);
        }
        self.push(l);
    }

    /// What follows a tunnel port's UDP header.
    fn tunnel(&mut self, kind: TunnelKind, at: usize, end: usize) {
        match kind {
            TunnelKind::Gtpu => self.gtpu(at, end),
            TunnelKind::GreInUdp | TunnelKind::FouGre => self.gre(at, end),
            TunnelKind::FouIpip => self.fou(kind, at, end, |w, a, e| w.ipv4(a, e)),
            TunnelKind::FouSit => self.fou(kind, at, end, |w, a, e| w.ipv6(a, e)),
            TunnelKind::Vxlan => self.vxlan(at, end),
            TunnelKind::Geneve => self.geneve(at, end),
            TunnelKind::Gue | TunnelKind::GueGre => self.gue(at, end),
        }
    }

    fn fou(
        &mut self,
        kind: TunnelKind,
        at: usize,
        end: usize,
        inner: impl FnOnce(&mut Self, usize, usize),
    ) {
        self.push(Layer::new("fou").with("kind", kind.name()));
        inner(self, at, end);
    }

    fn gtpu(&mut self, at: usize, end: usize) {
        let buf = self.buf;
        let Some(p) = self.open("gtpu", at, gtpu::Packet::new_checked(&buf[at..end])) else {
            return;
        };
        let mut l = Layer::new("gtpu")
            .with("message", p.msg_type().to_string())
            .with("message_type", u8::from(p.msg_type()))
            .with("teid", p.teid())
            .with("length", p.length());
        let mut flags = Vec::new();
        for (on, name) in [(p.e_flag(), "E"), (p.s_flag(), "S"), (p.pn_flag(), "PN")] {
            if on {
                flags.push(name);
            }
        }
        l.set("flags", flags.join(","));
        if let Some(s) = p.sequence() {
            l.set("sequence", s);
        }
        if let Some(n) = p.npdu() {
            l.set("npdu", n);
        }
        let exts: Vec<Value> = p
            .extensions()
            .map(|(ty, content)| gtpu_extension_json(ty, content))
            .collect();
        if !exts.is_empty() {
            l.set("extensions", exts);
        }
        if let Some(t) = p.first_unknown_required_extension() {
            l.set("unknown_required_extension", t.0);
        }
        let repr = gtpu::GtpuRepr::parse(&p);
        match &repr {
            Ok(r) => match r.message {
                gtpu::GtpuMessage::EchoResponse { recovery } => l.set("recovery", recovery),
                gtpu::GtpuMessage::ErrorIndication {
                    teid_data_i,
                    peer,
                    udp_port,
                } => {
                    l.set("teid_data_i", teid_data_i);
                    l.set("peer", peer.to_string());
                    if let Some(port) = udp_port {
                        l.set("udp_port", port);
                    }
                }
                gtpu::GtpuMessage::SupportedExtensionHeadersNotification(list) => {
                    l.set("supported_extensions", list.as_slice().to_vec())
                }
                _ => {}
            },
            Err(e) => l.set("repr_error", e.name()),
        }
        let payload = at + p.header_len();
        let is_gpdu = p.msg_type() == gtpu::MessageType::GPdu;
        let payload_end = at + gtpu::HEADER_LEN + p.length() as usize;
        self.push(l);
        if is_gpdu && payload < payload_end {
            self.ip_by_version(payload, payload_end);
        }
    }
}

impl Walker<'_> {
    /// Remembers an RCO announced by a tunnel whose payload starts at `at`
    /// and ends at `end`, and describes it for the tunnel's layer.
    fn announce_rco(&mut self, rco: RemoteChecksum, at: usize, end: usize) -> Value {
        let start = at + rco.start as usize;
        let field = at + rco.offset as usize;
        if field + 2 <= end && start <= end {
            self.rco = Some(PendingRco { start, field, end });
        }
        json!({"start": rco.start, "offset": rco.offset})
    }

    fn vxlan(&mut self, at: usize, end: usize) {
        let buf = self.buf;
        let Some(p) = self.open("vxlan", at, vxlan::Packet::new_checked(&buf[at..end])) else {
            return;
        };
        let payload = at + vxlan::HEADER_LEN;
        let mut flags = Vec::new();
        if p.vni_valid() {
            flags.push("I");
        }
        let mut l = Layer::new("vxlan")
            .with("vni", p.vni())
            .with("flags_word", format!("0x{:08x}", p.flags_word()));
        if let Some(rco) = p.rco() {
            flags.push("RCO");
            let mut v = self.announce_rco(rco.remote_checksum(), payload, end);
            v["transport"] = json!(if rco.udp() { "udp" } else { "tcp" });
            l.set("rco", v);
        }
        if let Some(g) = p.gbp() {
            flags.push("G");
            l.set(
                "gbp",
                json!({"policy_id": g.policy_id, "dont_learn": g.dont_learn,
                       "policy_applied": g.policy_applied}),
            );
        }
        l.fields
            .insert(1, ("flags", Value::String(flags.join(","))));
        let valid = p.vni_valid();
        self.push(l);
        if !valid {
            self.fail("vxlan", Error::Malformed, "I flag clear".into());
            return;
        }
        self.ethernet(payload, end);
    }

    fn geneve(&mut self, at: usize, end: usize) {
        let buf = self.buf;
        let Some(p) = self.open("geneve", at, geneve::Packet::new_checked(&buf[at..end])) else {
            return;
        };
        let Ok(repr) = self.check("geneve", at, geneve::GeneveRepr::parse(&p)) else {
            return;
        };
        let options: Vec<Value> = repr
            .options()
            .map(|o| match o {
                Ok(o) => json!({"class": o.class, "type": o.typ, "length": o.data.len(),
                                "critical": o.critical()}),
                Err(e) => json!({"error": e.name()}),
            })
            .collect();
        let mut l = Layer::new("geneve")
            .with("vni", repr.vni)
            .with("protocol", repr.protocol.to_string())
            .with("oam", repr.oam)
            .with("critical", repr.critical);
        if !options.is_empty() {
            l.set("options", options);
        }
        let payload = at + p.header_len();
        self.push(l);
        self.by_ethertype(repr.protocol, payload, end);
    }

    fn gue(&mut self, at: usize, end: usize) {
        let buf = self.buf;
        let Some(p) = self.open("gue", at, gue::Packet::new_checked(&buf[at..end])) else {
            return;
        };
        let Ok(repr) = self.check("gue", at, GueRepr::parse(&p)) else {
            return;
        };
        let payload = at + p.header_len();
        let mut l = Layer::new("gue").with("variant", p.variant());
        let fields = match repr {
            GueRepr::Data { proto, fields } => {
                l.set("proto", u8::from(proto));
                Some(fields)
            }
            GueRepr::Control { ctype, fields } => {
                l.set("control", true);
                l.set("ctype", ctype);
                Some(fields)
            }
            GueRepr::Direct { ipv6 } => {
                l.set("inner", if ipv6 { "ipv6" } else { "ipv4" });
                None
            }
        };
        if let Some(fields) = fields {
            l.set("hlen", p.hlen());
            l.set("flags", p.flags());
            match fields {
                GueFields::None => {}
                GueFields::Linux { .. } => l.set("encoding", "linux"),
                GueFields::Ietf { group_id, .. } => {
                    l.set("encoding", "ietf");
                    if let Some(g) = group_id {
                        l.set("group_id", g);
                    }
                }
            }
            if let Some(rco) = fields.rco() {
                let v = self.announce_rco(rco, payload, end);
                l.set("rco", v);
            }
        }
        self.push(l);
        match repr {
            GueRepr::Data { proto, .. } => self.gue_payload(proto, payload, end),
            GueRepr::Control { .. } => {}
            GueRepr::Direct { .. } => self.ip_by_version(at, end),
        }
    }

    /// A GUE data payload is an IP protocol without an IP header of its own
    /// (IPIP, SIT, GRE…), so only those that start with a header go on.
    fn gue_payload(&mut self, proto: IpProtocol, at: usize, end: usize) {
        if !self.captured_at(at) {
            return;
        }
        match proto {
            IpProtocol::Ipv4 => self.ipv4(at, end),
            IpProtocol::Ipv6 => self.ipv6(at, end),
            IpProtocol::Gre => self.gre(at, end),
            other => self.push(Layer::new("data").with("proto", u8::from(other))),
        }
    }
}

fn gtpu_extension_json(ty: gtpu::ExtensionType, content: &[u8]) -> Value {
    let mut o = json!({"type": ty.0, "length": (content.len() + 2) / 4});
    match gtpu::Extension::parse(ty, content) {
        Ok(gtpu::Extension::UdpPort(port)) => o["udp_port"] = json!(port),
        Ok(gtpu::Extension::PdcpPduNumber(n)) => o["pdcp_pdu_number"] = json!(n),
        Ok(gtpu::Extension::LongPdcpPduNumber(n)) => o["pdcp_pdu_number"] = json!(n),
        Ok(gtpu::Extension::PduSessionContainer(c)) => {
            o["pdu_session_container"] = json!({
                "pdu_type": if c.pdu_type == gtpu::PDU_TYPE_DL { "dl" } else if c.pdu_type == gtpu::PDU_TYPE_UL { "ul" } else { "other" },
                "qfi": c.qfi,
                "rqi": c.rqi,
                "ppi": c.ppp,
            })
        }
        Ok(gtpu::Extension::Other { .. }) => {}
        Err(e) => o["error"] = json!(e.name()),
    }
    o
}
