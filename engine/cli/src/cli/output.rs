//! What `perf --json FILE` and `--plot FILE.svg` write at the end of a RoCE run, from the rows the
//! table printed.

use serde_json::{Value, json};
use softrdma::perf::{self, BwRow, LatRow, record};

use super::args::PerfArgs;

/// The rows and counters of a run, gathered as the table prints them.
#[derive(Default)]
pub(crate) struct RunRecord {
    bw: Vec<BwRow>,
    lat: Vec<LatRow>,
    rows: Vec<Value>,
}

impl RunRecord {
    /// A bandwidth row and the counters of each side after it.
    pub(crate) fn bw(&mut self, r: &BwRow, counters: Value) {
        let mut v = record::bw_row(r);
        v["counters"] = counters;
        self.rows.push(v);
        self.bw.push(*r);
    }

    /// A bandwidth row measured from totals alone (two-process runs: no windowed peak, no
    /// baseline), and the counters of this side.
    pub(crate) fn bw_measured(&mut self, r: &BwRow, counters: Value) {
        self.bw(r, counters);
        if let Some(v) = self.rows.last_mut() {
            v["bw_peak_mb_per_sec"] = Value::Null;
        }
    }

    /// This side's counters without a row (the server of a bandwidth run measures nothing).
    pub(crate) fn counters_only(&mut self, counters: Value) {
        self.rows.push(json!({ "counters": counters }));
    }

    /// A latency row and the counters of each side after it.
    pub(crate) fn lat(&mut self, r: &LatRow, counters: Value) {
        let mut v = record::lat_row(r);
        v["counters"] = counters;
        self.rows.push(v);
        self.lat.push(r.clone());
    }

    /// Writes the JSON document and the plot `a` asks for; `title` names the run in the plot,
    /// `params` describes it in the document.
    pub(crate) fn write(
        self,
        a: &PerfArgs,
        title: &str,
        params: Value,
        totals: (u64, u64, u64),
    ) -> Result<(), String> {
        if let Some(path) = &a.plot {
            match (self.bw.is_empty(), self.lat.first()) {
                (false, _) => perf::plot::bandwidth(path, title, &self.bw)?,
                (true, Some(l)) => perf::plot::latency(path, title, l)?,
                (true, None) => return Err("nothing to plot: this side measured no rows".into()),
            }
            println!(" wrote the plot to {}", path.display());
        }
        if let Some(path) = &a.json {
            let doc = record::document(params, self.rows, totals.0, totals.1, totals.2);
            let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
            std::fs::write(path, text + "\n").map_err(|e| format!("writing {}: {e}", path.display()))?;
            println!(" wrote the results to {}", path.display());
        }
        Ok(())
    }
}

/// Counters of named sides as JSON.
pub(crate) fn counters(sides: &[(&str, &engine::verbs::Stats)]) -> Value {
    let mut m = serde_json::Map::new();
    for (name, st) in sides {
        m.insert((*name).into(), record::stats(st));
    }
    Value::Object(m)
}

/// The parameters every RoCE run shares.
pub(crate) fn params(a: &PerfArgs, op: &str, transport: &str, mode: &str) -> Value {
    json!({
        "op": op,
        "transport": transport,
        "mode": mode,
        "backend": a.backend().as_str(),
        "qps": a.qps,
        "mtu": a.mtu(),
        "tx_depth": a.tx_depth,
        "seed": a.seed,
        "iters": a.iters,
        "size": a.size,
        "all_sizes": a.all_sizes,
    })
}
