//! PNG charts of `tep-bench seeds --plot DIR`, drawn with plotters' bitmap
//! backend. The font is compiled in (DejaVu Sans, `assets/`), so that a
//! machine without fonts or fontconfig draws the same text.

use super::gtpu_checksum_gateway::Case;
use super::report::Bars;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontStyle;
use std::path::{Path, PathBuf};
use std::sync::Once;

/// DejaVu Sans (Bitstream Vera license, see assets/DejaVuSans-LICENSE).
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
/// The family name the charts ask for.
const FAMILY: &str = "sans-serif";

fn register_font() -> Result<(), String> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
            .map_err(|_| "the embedded font does not load".to_string());
    });
    result
}

/// The colour of each checksum mode's line.
fn colour(mode: &str) -> RGBColor {
    match mode {
        "zero" => RGBColor(31, 119, 180),
        "full" => RGBColor(214, 39, 40),
        "offload" => RGBColor(44, 160, 44),
        "lco" => RGBColor(148, 103, 189),
        _ => RGBColor(90, 90, 90),
    }
}

/// A rate as an axis label: 2k, 275k, 1M.
fn rate_label(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.0}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// Seed 000's sweep: average latency (µs, log scale) and loss (%) against
/// the offered rate (packets per second, log scale), one line per mode.
/// Returns the file written.
pub fn seed000_sweep(dir: &Path, sweep: &[Case], modes: &[&str]) -> Result<PathBuf, String> {
    register_font()?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join("seed000-sweep.png");
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let file = path.clone();
    let root = BitMapBackend::new(&file, (1200, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (left, right) = root.split_horizontally(600);
    let rate_max = sweep.iter().map(|c| c.offered_pps).fold(1_000.0, f64::max) * 1.2;
    let rate_min = sweep.iter().map(|c| c.offered_pps).fold(rate_max, f64::min) / 1.2;
    let lat_max = sweep
        .iter()
        .map(|c| c.report.avg_ns as f64 / 1000.0)
        .fold(10.0, f64::max)
        * 2.0;
    let loss_max = sweep.iter().map(|c| c.report.loss_pct).fold(1.0, f64::max) * 1.1;
    let series = |mode: &str, y: &dyn Fn(&Case) -> f64| -> Vec<(f64, f64)> {
        sweep
            .iter()
            .filter(|c| c.mode == mode)
            .map(|c| (c.offered_pps, y(c)))
            .collect()
    };

    let mut chart = ChartBuilder::on(&left)
        .caption("seed 000: average latency", (FAMILY, 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((rate_min..rate_max).log_scale(), (1.0..lat_max).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("offered rate, packets/s (1492-byte IPv4)")
        .y_desc("µs, send to the sink's kernel receive stamp")
        .x_labels(8)
        .y_labels(8)
        .x_label_formatter(&|v| rate_label(*v))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .light_line_style(WHITE)
        .label_style((FAMILY, 13))
        .draw()
        .map_err(|e| err(&e))?;
    draw_modes(&mut chart, modes, |m| {
        series(m, &|c| (c.report.avg_ns as f64 / 1000.0).max(1.0))
    })
    .map_err(|e| err(&e))?;

    let mut chart = ChartBuilder::on(&right)
        .caption("seed 000: loss", (FAMILY, 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((rate_min..rate_max).log_scale(), 0.0..loss_max)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("offered rate, packets/s (1492-byte IPv4)")
        .y_desc("% of the probes sent, by sequence number")
        .x_labels(8)
        .x_label_formatter(&|v| rate_label(*v))
        .light_line_style(WHITE)
        .label_style((FAMILY, 13))
        .draw()
        .map_err(|e| err(&e))?;
    draw_modes(&mut chart, modes, |m| series(m, &|c| c.report.loss_pct)).map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    drop(root);
    Ok(path)
}

/// The colours of a bar chart's series, in order.
const PALETTE: [RGBColor; 5] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
];

/// A grouped bar chart: one group per x position, one bar per series in
/// it, a missing value left out; the note (how it was measured) under the
/// chart. Returns the file written.
pub fn bars(dir: &Path, b: &Bars) -> Result<PathBuf, String> {
    register_font()?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(&b.file);
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let file = path.clone();
    let width = (220 * b.groups.len() as u32).clamp(900, 1600);
    // The note wrapped to the width, about 7 pixels a character.
    let lines = wrap(&b.note, (width as usize - 24) / 7);
    let height = 530 + 18 * lines.len() as u32 + 8;
    let root = BitMapBackend::new(&file, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (top, bottom) = root.split_vertically(530);
    let n = b.groups.len().max(1) as f64;
    let y_max = b
        .groups
        .iter()
        .flat_map(|(_, v)| v.iter().flatten())
        .fold(0.0f64, |a, &v| a.max(v))
        .max(1e-9)
        * 1.4;
    let mut chart = ChartBuilder::on(&top)
        .caption(&b.title, (FAMILY, 20))
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..n, 0.0..y_max)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_x_axis()
        .y_desc(b.y_label.as_str())
        .light_line_style(WHITE)
        .label_style((FAMILY, 13))
        .draw()
        .map_err(|e| err(&e))?;
    let k = b.series.len().max(1) as f64;
    // Each group spans 0.8 of its slot, split among the series.
    let w = 0.8 / k;
    for (s, name) in b.series.iter().enumerate() {
        let c = PALETTE[s % PALETTE.len()];
        let rects: Vec<_> = b
            .groups
            .iter()
            .enumerate()
            .filter_map(|(g, (_, vals))| {
                let v = (*vals.get(s)?)?;
                let x0 = g as f64 + 0.1 + s as f64 * w;
                Some(Rectangle::new([(x0, 0.0), (x0 + w * 0.9, v)], c.filled()))
            })
            .collect();
        chart
            .draw_series(rects)
            .map_err(|e| err(&e))?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FAMILY, 13))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    // The group names under their bars.
    for (g, (name, _)) in b.groups.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(g as f64 + 0.5, 0.0));
        let style =
            TextStyle::from((FAMILY, 13).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        root.draw(&Text::new(name.clone(), (x, y + 8), style))
            .map_err(|e| err(&e))?;
    }
    for (i, line) in lines.into_iter().enumerate() {
        bottom
            .draw(&Text::new(
                line,
                (12, 4 + 18 * i as i32),
                (FAMILY, 13).into_font().color(&RGBColor(90, 90, 90)),
            ))
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    drop(chart);
    drop(root);
    Ok(path)
}

/// `text` in lines of at most `width` characters, broken at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(l) if l.chars().count() + 1 + word.chars().count() <= width => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// One line with its points per mode, and the legend.
fn draw_modes<'a, DB: DrawingBackend + 'a, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    modes: &[&str],
    points: impl Fn(&str) -> Vec<(f64, f64)>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for &m in modes {
        let pts = points(m);
        let c = colour(m);
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
            .label(m)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))?;
    }
    chart
        .configure_series_labels()
        .label_font((FAMILY, 13))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gtpu_checksum_gateway::Sent;
    use crate::probe::Report;

    #[test]
    fn rate_labels() {
        assert_eq!(rate_label(500.0), "500");
        assert_eq!(rate_label(275_000.0), "275k");
        assert_eq!(rate_label(1_000_000.0), "1.0M");
    }

    /// A chart of two modes is a PNG of the size asked, with the embedded
    /// font (no system font needed).
    #[test]
    fn the_sweep_chart_is_a_png() {
        let case = |mode: &str, pps: f64, avg_ns: u64, loss_pct: f64| Case {
            mode: mode.to_string(),
            offered_pps: pps,
            sent: Sent::default(),
            report: Report {
                avg_ns,
                loss_pct,
                ..Report::default()
            },
            generator_short: false,
            seed: None,
            workers: 1,
            seat: Default::default(),
        };
        let sweep = [
            case("zero", 1e3, 9_000, 0.0),
            case("zero", 1e4, 12_000, 0.0),
            case("full", 1e3, 9_500, 0.0),
            case("full", 1e4, 30_000, 2.5),
        ];
        let dir = std::env::temp_dir().join(format!("tep-plot-{}", std::process::id()));
        let path = seed000_sweep(&dir, &sweep, &["zero", "full"]).unwrap();
        let png = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        // IHDR: width and height.
        assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 1200);
        assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), 520);
    }

    #[test]
    fn notes_wrap_at_spaces() {
        assert_eq!(wrap("a bb ccc dddd", 6), vec!["a bb", "ccc", "dddd"]);
        assert!(wrap("", 10).is_empty());
    }

    #[test]
    fn a_bar_chart_is_a_png_with_missing_values_left_out() {
        let b = Bars {
            file: "bars.png".into(),
            title: "t".into(),
            y_label: "% per Gbit/s".into(),
            note: "how".into(),
            series: vec!["a".into(), "b".into()],
            groups: vec![
                ("GRE/FOU".into(), vec![Some(10.0), Some(12.0)]),
                ("GRE/GUE".into(), vec![Some(9.0), None]),
            ],
        };
        let dir = std::env::temp_dir().join(format!("tep-bars-{}", std::process::id()));
        let path = bars(&dir, &b).unwrap();
        let png = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 900);
    }
}
