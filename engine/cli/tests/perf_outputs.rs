//! `perf --json` and `--plot` (issue 33): the JSON document holds the numbers the table printed,
//! and the SVG has the run's title, labelled axes and one point per size (bandwidth) or one bar
//! per bucket (latency) at the values the JSON holds. The SVG is read with an XML parser.

mod common;

use common::scratch_dir;
use serde_json::Value;

/// Plotters' colour of the engine's series.
const ENGINE: &str = "#1F77B4";

/// Runs softrdma, which must succeed; its stdout.
fn softrdma(args: &[&str]) -> String {
    let o = common::softrdma(args);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{args:?}: {out}{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// The table lines of a run: (size, the numbers after it).
fn table(out: &str) -> Vec<(u64, Vec<f64>)> {
    out.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let size = w.next()?.parse().ok()?;
            let rest: Vec<f64> = w.map(|x| x.parse().unwrap_or(f64::NAN)).collect();
            (rest.len() >= 5).then_some((size, rest))
        })
        .collect()
}

fn close(a: f64, b: f64, decimals: i32) -> bool {
    (a - b).abs() <= 0.5 * 10f64.powi(-decimals) + 1e-9
}

/// Points of an SVG polyline.
fn points(n: roxmltree::Node<'_, '_>) -> Vec<(f64, f64)> {
    n.attribute("points")
        .unwrap_or("")
        .split_whitespace()
        .map(|p| {
            let (x, y) = p.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect()
}

/// Whether `pixels[i]` is an affine function of `values[i]` (within a pixel of rounding), the map
/// fitted through the smallest and largest value.
fn affine(values: &[f64], pixels: &[f64]) -> bool {
    let lo = (0..values.len()).min_by(|&a, &b| values[a].total_cmp(&values[b])).unwrap();
    let hi = (0..values.len()).max_by(|&a, &b| values[a].total_cmp(&values[b])).unwrap();
    if values[hi] == values[lo] {
        return pixels.iter().all(|p| (p - pixels[lo]).abs() <= 1.5);
    }
    let slope = (pixels[hi] - pixels[lo]) / (values[hi] - values[lo]);
    values.iter().zip(pixels).all(|(v, p)| (pixels[lo] + slope * (v - values[lo]) - p).abs() <= 1.5)
}

fn texts(doc: &roxmltree::Document<'_>) -> String {
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn bandwidth_sweep_json_and_plot_hold_the_table() {
    let dir = scratch_dir("perf-outputs-bw");
    let (svg, json) = (dir.join("bw.svg"), dir.join("bw.json"));
    let out = softrdma(&[
        "perf",
        "write",
        "--all-sizes",
        "--iters",
        "40",
        "--plot",
        svg.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let rows = table(&out);
    assert_eq!(rows.len(), 23, "2 B to 8 MiB: {out}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["params"]["op"], "write");
    assert_eq!(doc["params"]["backend"], "sim");
    let jrows = doc["rows"].as_array().unwrap();
    assert_eq!(jrows.len(), rows.len());
    for ((size, t), j) in rows.iter().zip(jrows) {
        let f = |k: &str| j[k].as_f64().unwrap_or_else(|| panic!("{k} in {j}"));
        assert_eq!(j["size"].as_u64(), Some(*size));
        assert_eq!(j["iterations"].as_f64(), Some(t[0]));
        assert!(
            close(f("bw_peak_mb_per_sec"), t[1], 2),
            "peak {size}: {} vs {}",
            f("bw_peak_mb_per_sec"),
            t[1]
        );
        assert!(close(f("bw_average_mb_per_sec"), t[2], 2), "avg {size}");
        assert!(close(f("msg_rate_mpps"), t[3], 6), "rate {size}");
        assert!(close(f("bw_average_gb_per_sec"), t[4], 2), "Gb/s {size}");
        assert!(j["baseline"]["engine_ratio"].as_f64().is_some_and(|r| r > 0.0), "{j}");
        assert!(j["counters"]["sim0"]["frames_tx"].as_u64().is_some_and(|n| n > 0), "{j}");
        assert_eq!(j["errors"], 0);
    }
    assert_eq!(doc["errors"], 0);

    let text = std::fs::read_to_string(&svg).unwrap();
    let svg = roxmltree::Document::parse(&text).expect("the plot is well-formed XML");
    let words = texts(&svg);
    for label in ["perf write bandwidth", "message size [bytes]", "BW average [MB/s]", "MsgRate [Mpps]"] {
        assert!(words.contains(label), "{label:?} missing from the plot's text:\n{words}");
    }
    let series: Vec<Vec<(f64, f64)>> = svg
        .descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some(ENGINE))
        .map(points)
        .filter(|p| p.len() == rows.len())
        .collect();
    assert_eq!(series.len(), 2, "the bandwidth and the message rate, one point per size");
    let sizes: Vec<f64> = rows.iter().map(|r| (r.0 as f64).ln()).collect();
    for (s, key) in series.iter().zip(["bw_average_mb_per_sec", "msg_rate_mpps"]) {
        let values: Vec<f64> = jrows.iter().map(|j| j[key].as_f64().unwrap()).collect();
        let (xs, ys): (Vec<f64>, Vec<f64>) = s.iter().copied().unzip();
        assert!(affine(&sizes, &xs), "{key}: x is not log(size): {xs:?}");
        assert!(affine(&values, &ys), "{key}: y is not the values {values:?}: {ys:?}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn latency_json_and_histogram_hold_the_table() {
    let dir = scratch_dir("perf-outputs-lat");
    let (svg, json) = (dir.join("lat.svg"), dir.join("lat.json"));
    let out = softrdma(&[
        "perf",
        "send",
        "--mode",
        "lat",
        "--iters",
        "500",
        "--plot",
        svg.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let rows = table(&out);
    assert_eq!(rows.len(), 1, "{out}");
    let t = &rows[0].1;
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let j = &doc["rows"][0];
    let names =
        ["iterations", "t_min_usec", "t_max_usec", "t_typical_usec", "t_avg_usec", "p99_usec", "p99_9_usec"];
    for (k, want) in names.iter().zip(t) {
        let got = j[k].as_f64().unwrap();
        assert!(close(got, *want, if *k == "iterations" { 0 } else { 2 }), "{k}: {got} vs {want}");
    }
    let buckets = j["histogram"].as_array().unwrap();
    let counts: Vec<f64> = buckets.iter().map(|b| b["count"].as_f64().unwrap()).collect();
    assert_eq!(counts.iter().sum::<f64>(), 500.0, "every message is in a bucket");
    // The same-run baseline (issue 29): the round trip's frames in a plain loop, and the typical
    // time over it, printed and in the JSON alike.
    let b = &j["baseline"];
    let base_ns = b["ns_per_round_trip"].as_f64().unwrap();
    assert!(base_ns > 0.0 && b["intact"].as_bool() == Some(true), "{b}");
    let ratio = b["typical_over_baseline"].as_f64().unwrap();
    let typical = j["t_typical_usec"].as_f64().unwrap();
    assert!(close(ratio, typical * 1000.0 / base_ns, 6), "{ratio} vs {typical} us / {base_ns} ns");
    let printed: f64 =
        out.split("typical / baseline: ").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    assert!(close(printed, ratio, 1), "printed {printed}, JSON {ratio}");
    assert!(out.contains(&format!("{base_ns:.0} ns per round trip")), "{out}");

    let text = std::fs::read_to_string(&svg).unwrap();
    let svg = roxmltree::Document::parse(&text).expect("the plot is well-formed XML");
    let words = texts(&svg);
    for label in ["perf send latency", "latency [usec]", "messages", "median", "p99.9"] {
        assert!(words.contains(label), "{label:?} missing from the plot's text:\n{words}");
    }
    let bars: Vec<(f64, f64)> = svg
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some(ENGINE))
        .map(|n| {
            (n.attribute("y").unwrap().parse().unwrap(), n.attribute("height").unwrap().parse().unwrap())
        })
        .collect();
    // One bar per bucket, then the legend's swatch.
    assert_eq!(bars.len(), buckets.len() + 1);
    let heights: Vec<f64> = bars[..buckets.len()].iter().map(|b| b.1).collect();
    assert!(affine(&counts, &heights), "bar heights {heights:?} are not the counts {counts:?}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A run longer than two seconds shows its progress on stderr when asked to (a terminal asks by
/// default), and a run whose stderr is not a terminal shows none.
#[test]
fn long_runs_show_progress_on_stderr() {
    let run = |progress: Option<&str>| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_softrdma"));
        c.args(["perf", "write", "--size", "4096", "--iters", "5000000", "--no-baseline"]);
        match progress {
            Some(p) => c.env("SOFTRDMA_PROGRESS", p),
            None => c.env_remove("SOFTRDMA_PROGRESS"),
        };
        let start = std::time::Instant::now();
        let o = c.output().unwrap();
        assert!(o.status.success());
        (String::from_utf8_lossy(&o.stderr).into_owned(), start.elapsed())
    };
    let (err, took) = run(Some("always"));
    assert!(
        took.as_secs_f64() > 2.5,
        "the run must outlast the two seconds before a progress line: {took:?}"
    );
    let line =
        err.split('\r').find(|l| l.contains("messages (")).unwrap_or_else(|| panic!("no progress: {err:?}"));
    assert!(
        line.contains("size 4096: ") && line.contains("/5000000 messages") && line.contains("MB/s"),
        "{line:?}"
    );
    assert!(err.ends_with("\r\x1b[K"), "the line is erased at the end: {err:?}");
    assert_eq!(run(None).0, "", "stderr is a pipe here: no progress");
}

/// A run of one size plots its goodput over time: one point per twentieth of the messages, at the
/// times and rates the JSON holds, and the run's average.
#[test]
fn a_one_size_run_plots_its_goodput_over_time() {
    let dir = scratch_dir("perf-outputs-goodput");
    let (svg, json) = (dir.join("goodput.svg"), dir.join("goodput.json"));
    let (s, j) = (svg.to_str().unwrap(), json.to_str().unwrap());
    softrdma(&[
        "perf",
        "write",
        "--iters",
        "2000",
        "--loss",
        "0.01",
        "--no-baseline",
        "--plot",
        s,
        "--json",
        j,
    ]);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let timeline = doc["rows"][0]["goodput_timeline"].as_array().unwrap();
    assert!((10..=20).contains(&timeline.len()), "a point per twentieth of 2000 messages: {timeline:?}");
    let t: Vec<f64> = timeline.iter().map(|p| p["t_sec"].as_f64().unwrap()).collect();
    let mb: Vec<f64> = timeline.iter().map(|p| p["mb_per_sec"].as_f64().unwrap()).collect();
    assert!(t.windows(2).all(|w| w[0] < w[1]) && mb.iter().all(|&v| v > 0.0), "{timeline:?}");

    let text = std::fs::read_to_string(&svg).unwrap();
    let svg = roxmltree::Document::parse(&text).expect("the plot is well-formed XML");
    let words = texts(&svg);
    for label in ["perf write", "goodput over time", "time [s]", "goodput [MB/s]", "average"] {
        assert!(words.contains(label), "{label:?} missing from the plot's text:\n{words}");
    }
    let line = svg
        .descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some(ENGINE))
        .map(points)
        .find(|p| p.len() == timeline.len())
        .expect("the goodput series");
    let (xs, ys): (Vec<f64>, Vec<f64>) = line.into_iter().unzip();
    assert!(affine(&t, &xs), "x is not the time: {t:?} {xs:?}");
    assert!(affine(&mb, &ys), "y is not the goodput: {mb:?} {ys:?}");
    std::fs::remove_dir_all(dir).unwrap();
}
