//! `tep decode`: dissects captured packets with tep-wire, tunnels inside
//! tunnels included, one line (or one JSON object) per packet.
//!
//! A frame the snap length cut is dissected as far as its headers were
//! captured; checksums over bytes that were not captured are reported
//! `unverifiable`, never `invalid`.

pub use crate::{dissect, Dissection, PortMap};

use crate::{read_frames, CaptureError, Frame};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One line of text per packet.
    Text,
    /// One JSON object per line.
    Json,
}

/// Decodes every frame of `path` to `out`. Returns the number of frames.
pub fn run(
    path: &Path,
    ports: &PortMap,
    format: Format,
    out: &mut impl Write,
) -> Result<usize, DecodeError> {
    let mut n = 0usize;
    let mut io_err = None;
    let res = read_frames(path, |frame| {
        n += 1;
        if io_err.is_some() {
            return;
        }
        let d = dissect(&frame, ports);
        let line = match format {
            Format::Text => text_line(n, &frame, &d),
            Format::Json => json_line(n, &frame, &d).to_string(),
        };
        if let Err(e) = writeln!(out, "{line}") {
            io_err = Some(e);
        }
    });
    if let Some(e) = io_err {
        return Err(DecodeError::Output(e));
    }
    res.map_err(DecodeError::Capture)?;
    Ok(n)
}

/// Why decoding stopped.
#[derive(Debug)]
pub enum DecodeError {
    /// The input is not a readable capture.
    Capture(CaptureError),
    /// Writing the output failed (e.g. a closed pipe).
    Output(std::io::Error),
}

fn text_line(n: usize, frame: &Frame, d: &Dissection) -> String {
    let mut s = format!("{n:>5} len={}", frame.orig_len);
    if frame.data.len() < frame.orig_len {
        s += &format!(" caplen={}", frame.data.len());
    }
    for layer in &d.layers {
        s += " | ";
        s += layer.name;
        for (k, v) in &layer.fields {
            s += &format!(" {k}={}", text_value(v));
        }
    }
    if let Some(e) = &d.error {
        s += &format!(" | ERROR {}: {}", e.layer, e.error);
    }
    s
}

fn text_value(v: &Value) -> String {
    match v {
        // A checksum: 0xVALUE/status, and where RCO completes it, ->0xVALUE/status.
        Value::Object(o) if o.contains_key("status") && o.contains_key("value") => {
            let hex = |v: &Value| v.as_u64().map_or("-".to_string(), |n| format!("0x{n:04x}"));
            let mut s = format!("{}/{}", hex(&o["value"]), text_value(&o["status"]));
            if let Some(c) = o.get("completed") {
                s += &format!("->{}", hex(c));
                if let Some(cs) = o.get("completed_status") {
                    s += &format!("/{}", text_value(cs));
                }
            }
            s
        }
        Value::String(s) => s.clone(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(text_value).collect::<Vec<_>>().join(",")
        ),
        Value::Object(o) => {
            let inner: Vec<String> = o
                .iter()
                .map(|(k, v)| format!("{k}:{}", text_value(v)))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        other => other.to_string(),
    }
}

fn json_line(n: usize, frame: &Frame, d: &Dissection) -> Value {
    let layers: Vec<Value> = d
        .layers
        .iter()
        .map(|l| {
            let mut o = serde_json::Map::new();
            o.insert("layer".into(), Value::String(l.name.into()));
            for (k, v) in &l.fields {
                o.insert((*k).into(), v.clone());
            }
            Value::Object(o)
        })
        .collect();
    let mut o = json!({
        "frame": n,
        "time": frame.timestamp.as_secs_f64(),
        "len": frame.orig_len,
        "caplen": frame.data.len(),
        "layers": layers,
    });
    if let Some(e) = &d.error {
        o["error"] = json!({"layer": e.layer, "reason": e.reason, "message": e.error});
    }
    o
}
