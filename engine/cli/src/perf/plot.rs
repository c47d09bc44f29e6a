//! `perf --plot FILE.svg`: bandwidth and message rate against message size (with the baseline
//! where it ran), a one-size run's goodput over time, or a latency run's histogram with its
//! percentiles, drawn with plotters and titled
//! with the run's parameters and build. The figures are the table's
//! ([`BwRow::figures`](super::config::BwRow), [`lat_buckets`]).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::config::{BwRow, LatRow};
use super::record::{LAT_BUCKETS, lat_buckets};
use super::report::{build_kind, mb};

const SIZE: (u32, u32) = (1100, 800);
const ENGINE: RGBColor = RGBColor(31, 119, 180);
const BASELINE: RGBColor = RGBColor(214, 39, 40);

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Refuses anything but an `.svg` path (the only backend built in).
fn check_path(path: &std::path::Path) -> Result<(), String> {
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => Ok(()),
        _ => Err(format!("{}: --plot writes SVG (name the file *.svg)", path.display())),
    }
}

fn titled<'p>(
    root: &DrawingArea<SVGBackend<'p>, Shift>,
    title: &str,
) -> Result<DrawingArea<SVGBackend<'p>, Shift>, String> {
    root.fill(&WHITE).map_err(err)?;
    let full = format!("{title} - {}", build_kind());
    root.titled(&full, ("sans-serif", 18)).map_err(err)
}

/// Bandwidth (MB/s, with the baseline's where it ran) and message rate (Mpps) against message
/// size, one point per row; a run of one size with a timeline: its goodput over time.
pub fn bandwidth(path: &std::path::Path, title: &str, rows: &[BwRow]) -> Result<(), String> {
    check_path(path)?;
    if rows.is_empty() {
        return Err("no rows to plot".into());
    }
    if let [row] = rows {
        if row.timeline.points().len() >= 2 {
            return goodput(path, title, row);
        }
    }
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    let area = titled(&root, title)?;
    let (top, bottom) = area.split_vertically(SIZE.1 / 2 - 20);
    let sizes = |r: &BwRow| r.size.max(1) as f64;
    let (lo, hi) = rows.iter().fold((f64::MAX, 0f64), |(l, h), r| (l.min(sizes(r)), h.max(sizes(r))));
    let x = lo / 1.5..hi * 1.5;
    let bw: Vec<(f64, f64)> = rows.iter().map(|r| (sizes(r), r.figures().avg_mb)).collect();
    let base: Vec<(f64, f64)> =
        rows.iter().filter_map(|r| Some((sizes(r), mb(r.baseline?.bytes_per_sec())))).collect();
    let top_y = bw.iter().chain(&base).map(|p| p.1).fold(0.0, f64::max) * 1.1 + 1e-9;
    let mut c = ChartBuilder::on(&top)
        .caption("bandwidth", ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x.clone().log_scale(), 0.0..top_y)
        .map_err(err)?;
    c.configure_mesh()
        .x_desc("message size [bytes]")
        .y_desc("BW average [MB/s]")
        .x_label_formatter(&size_label)
        .draw()
        .map_err(err)?;
    series(&mut c, &bw, ENGINE, "engine")?;
    if !base.is_empty() {
        series(&mut c, &base, BASELINE, "baseline (plain loop, one thread)")?;
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    let rate: Vec<(f64, f64)> = rows.iter().map(|r| (sizes(r), r.figures().mpps)).collect();
    let rate_y = rate.iter().map(|p| p.1).fold(0.0, f64::max) * 1.1 + 1e-9;
    let mut c = ChartBuilder::on(&bottom)
        .caption("message rate", ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x.log_scale(), 0.0..rate_y)
        .map_err(err)?;
    c.configure_mesh()
        .x_desc("message size [bytes]")
        .y_desc("MsgRate [Mpps]")
        .x_label_formatter(&size_label)
        .draw()
        .map_err(err)?;
    series(&mut c, &rate, ENGINE, "engine")?;
    root.present().map_err(err)
}

/// One size's goodput over time (a dip is a loss, a stall, a slow receiver), with the run's
/// average as a line.
fn goodput(path: &std::path::Path, title: &str, row: &BwRow) -> Result<(), String> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    let area = titled(&root, title)?;
    let timeline = row.timeline.points();
    let end = timeline.iter().map(|p| p.0).fold(0.0, f64::max).max(row.wall.as_secs_f64());
    let avg = row.figures().avg_mb;
    let top = timeline.iter().map(|p| p.1).fold(avg, f64::max) * 1.1 + 1e-9;
    let mut c = ChartBuilder::on(&area)
        .caption(format!("goodput over time, {}-byte messages", row.size), ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..end * 1.02 + 1e-9, 0.0..top)
        .map_err(err)?;
    c.configure_mesh().x_desc("time [s]").y_desc("goodput [MB/s]").draw().map_err(err)?;
    let points = timeline.iter().copied();
    c.draw_series(LineSeries::new(points.clone(), ENGINE.stroke_width(2)))
        .map_err(err)?
        .label("MB/s over each twentieth of the messages")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], ENGINE.stroke_width(2)));
    c.draw_series(points.map(|p| Circle::new(p, 4, ENGINE.filled()))).map_err(err)?;
    c.draw_series(LineSeries::new([(0.0, avg), (end, avg)], BASELINE.stroke_width(1)))
        .map_err(err)?
        .label(format!("average {avg:.2} MB/s"))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BASELINE.stroke_width(1)));
    c.configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// A message size as an axis label (the log axis ticks at powers of ten): 100, 10k, 1M.
fn size_label(v: &f64) -> String {
    match *v {
        v if v >= 1e6 => format!("{:.0}M", v / 1e6),
        v if v >= 1e3 => format!("{:.0}k", v / 1e3),
        v => format!("{v:.0}"),
    }
}

type LogChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<LogCoord<f64>, plotters::coord::types::RangedCoordf64>>;

/// A line through `points` with a marker on each, labelled.
fn series(
    c: &mut LogChart<'_, '_>,
    points: &[(f64, f64)],
    color: RGBColor,
    label: &str,
) -> Result<(), String> {
    c.draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))
        .map_err(err)?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    c.draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled()))).map_err(err)?;
    Ok(())
}

/// A latency run's histogram ([`LAT_BUCKETS`] log-spaced buckets from the fastest message to the
/// slowest) with the median, p99 and p99.9 marked.
pub fn latency(path: &std::path::Path, title: &str, row: &LatRow) -> Result<(), String> {
    check_path(path)?;
    let buckets = lat_buckets(row, LAT_BUCKETS);
    let (Some(first), Some(last)) = (buckets.first(), buckets.last()) else {
        return Err("no latencies to plot".into());
    };
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    let area = titled(&root, title)?;
    let top = buckets.iter().map(|b| b.2).max().unwrap_or(1) as f64 * 1.15;
    let mut c = ChartBuilder::on(&area)
        .caption(format!("latency, post to completion, {} messages", row.wall_ns.len()), ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((first.0..last.1).log_scale(), 0.0..top)
        .map_err(err)?;
    c.configure_mesh().x_desc("latency [usec]").y_desc("messages").draw().map_err(err)?;
    c.draw_series(
        buckets.iter().map(|&(from, to, n)| Rectangle::new([(from, 0.0), (to, n as f64)], ENGINE.filled())),
    )
    .map_err(err)?
    .label("messages per bucket")
    .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], ENGINE.filled()));
    let h = &row.wall_ns;
    for (name, q) in [("median", 0.5), ("p99", 0.99), ("p99.9", 0.999)] {
        let at = (h.value_at_quantile(q) as f64 / 1000.0).clamp(first.0, last.1);
        c.draw_series(LineSeries::new([(at, 0.0), (at, top)], BASELINE.stroke_width(1))).map_err(err)?;
        c.draw_series(std::iter::once(Text::new(
            format!("{name} {at:.2}"),
            (
                at,
                top * if q == 0.5 {
                    0.95
                } else if q == 0.99 {
                    0.88
                } else {
                    0.81
                },
            ),
            ("sans-serif", 13),
        )))
        .map_err(err)?;
    }
    c.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(err)?;
    root.present().map_err(err)
}
