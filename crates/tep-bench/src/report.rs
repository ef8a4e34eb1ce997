//! What a seed's experiment reports: its table, its targets judged, its
//! charts and its JSON, so that `tep-bench seeds` treats every seed alike.

use serde::Serialize;

/// One of tep's targets, as measured.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    pub name: String,
    pub pass: bool,
    pub detail: String,
}

/// The targets as lines of text.
pub fn targets_text(targets: &[Target]) -> String {
    let mut out = String::new();
    if !targets.is_empty() {
        out += "\ntargets:\n";
    }
    for t in targets {
        out += &format!(
            "  {} {}: {}\n",
            if t.pass { "PASS" } else { "FAIL" },
            t.name,
            t.detail
        );
    }
    out
}

/// A bar chart: groups along the x axis, one bar per series in each.
#[derive(Clone, Debug, Serialize)]
pub struct Bars {
    /// File name in the plot directory.
    pub file: String,
    pub title: String,
    /// The y axis: what and in which unit.
    pub y_label: String,
    /// How it was measured, under the chart.
    pub note: String,
    pub series: Vec<String>,
    /// (group, one value per series; None: not measured).
    pub groups: Vec<(String, Vec<Option<f64>>)>,
}

/// One seed's results.
pub struct SeedReport {
    pub seed: &'static str,
    pub text: String,
    pub json: serde_json::Value,
    pub targets: Vec<Target>,
    pub charts: Vec<Bars>,
    /// Every case passed traffic.
    pub passed: bool,
}

/// `x / y`, or None when y is not positive.
pub fn ratio(x: f64, y: f64) -> Option<f64> {
    (y > 0.0 && x.is_finite()).then(|| x / y)
}

/// A number for a table cell, "-" for none.
pub fn cell(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.decimals$}"),
        _ => "-".to_string(),
    }
}
