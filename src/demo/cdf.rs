//! The fridge's delay distributions as pictures: the CDF the peer estimated (from the combined
//! weighted histograms of every `fridge_quantiles` record of a point and kind) next to the
//! empirical CDF of the true request→response delays, as one SVG file (a panel per point and
//! kind, log-scaled delay axis) and as a compact text plot for the terminal.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use wirelat_trace::truth::Truth;

/// One panel: a point's distribution of one exchange kind.
struct Panel {
    title: String,
    /// True delays, ns, ascending.
    truth: Vec<f64>,
    /// Estimated CDF as (delay ns, F) vertices, ascending; empty when nothing was estimated.
    est: Vec<(f64, f64)>,
}

/// The panels of a run.
pub struct Pictures {
    panels: Vec<Panel>,
}

/// The record name of an exchange kind (`tcp_handshake`, `dns`).
pub fn kind_name<T: serde::Serialize>(kind: &T) -> String {
    serde_json::to_value(kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// Sums the histogram bins of every fridge record per (point, kind): (low, high) → pairs.
type Bins = BTreeMap<(u64, Option<u64>), f64>;

fn estimated_bins(records: &str) -> BTreeMap<(String, String), Bins> {
    let mut out: BTreeMap<(String, String), Bins> = BTreeMap::new();
    for line in records.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if v.get("record").and_then(|r| r.as_str()) != Some("fridge_quantiles") {
            continue;
        }
        let (Some(point), Some(kind)) = (v["point"].as_str(), v["kind"].as_str()) else { continue };
        let Some(bins) = v["report"]["all"]["histogram"].as_array() else { continue };
        let acc = out.entry((point.to_string(), kind.to_string())).or_default();
        for b in bins {
            let (Some(low), Some(pairs)) = (b["low_ns"].as_u64(), b["pairs"].as_f64()) else { continue };
            if pairs.is_finite() && pairs > 0.0 {
                *acc.entry((low, b["high_ns"].as_u64())).or_default() += pairs;
            }
        }
    }
    out
}

/// CDF vertices of summed bins: F rises linearly across each closed bin; the open last bin's
/// mass counts in the total but is not drawn (its upper edge is unknown).
fn cdf_vertices(bins: &Bins) -> Vec<(f64, f64)> {
    let total: f64 = bins.values().sum();
    if total <= 0.0 {
        return Vec::new();
    }
    let mut v = Vec::new();
    let mut cum = 0.0;
    for (&(low, high), &pairs) in bins {
        let Some(high) = high else { continue };
        if v.is_empty() {
            v.push((low.max(1) as f64, 0.0));
        }
        cum += pairs;
        v.push((high.max(1) as f64, (cum / total).min(1.0)));
    }
    v
}

fn truth_cdf(sorted: &[f64], x: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted.partition_point(|d| *d <= x) as f64 / sorted.len() as f64
}

fn est_cdf(v: &[(f64, f64)], x: f64) -> Option<f64> {
    let first = v.first()?;
    if x <= first.0 {
        return Some(0.0);
    }
    for w in v.windows(2) {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        if x <= x1 {
            let t = if x1 > x0 { (x.ln() - x0.ln()) / (x1.ln() - x0.ln()) } else { 1.0 };
            return Some(y0 + t.clamp(0.0, 1.0) * (y1 - y0));
        }
    }
    v.last().map(|l| l.1)
}

fn fmt_delay(ns: f64) -> String {
    if ns >= 1e6 { format!("{:.3}ms", ns / 1e6) } else { format!("{:.1}µs", ns / 1e3) }
}

impl Panel {
    /// The delay range drawn: both curves, at least 1 µs, padded to whole decades' edges.
    fn range(&self) -> (f64, f64) {
        let mut lo = f64::INFINITY;
        let mut hi: f64 = 0.0;
        for &d in &self.truth {
            lo = lo.min(d);
            hi = hi.max(d);
        }
        for &(x, _) in &self.est {
            lo = lo.min(x);
            hi = hi.max(x);
        }
        let lo = lo.clamp(1_000.0, 1e12);
        let hi = hi.max(lo * 10.0);
        (lo * 0.8, hi * 1.25)
    }
}

impl Pictures {
    /// The panels of every point and kind with true samples or an estimate.
    pub fn build(truth: &Truth, records: &str) -> Pictures {
        let est = estimated_bins(records);
        let mut panels = Vec::new();
        for f in &truth.fridge {
            let kind = kind_name(&f.kind);
            let point = f.point.name().to_string();
            let mut t: Vec<f64> = f.delay_ns.iter().map(|&d| d as f64).collect();
            t.sort_by(f64::total_cmp);
            let e = est.get(&(point.clone(), kind.clone())).map(cdf_vertices).unwrap_or_default();
            if t.is_empty() && e.is_empty() {
                continue;
            }
            panels.push(Panel {
                title: format!("point {} · {} ({} true samples)", point.to_uppercase(), kind, t.len()),
                truth: t,
                est: e,
            });
        }
        Pictures { panels }
    }

    /// Compact text plots: F from 0 to 1 upwards, log delay rightwards; `*` estimate, `o` truth,
    /// `#` both.
    pub fn text(&self) -> String {
        const COLS: usize = 60;
        const ROWS: usize = 8;
        let mut s = String::new();
        let _ = writeln!(s, "\nFridge delay CDFs (`*` estimate, `o` truth, `#` both; log delay axis):");
        for p in &self.panels {
            let (lo, hi) = p.range();
            let mut grid = vec![[b' '; COLS]; ROWS + 1];
            #[allow(clippy::needless_range_loop)] // c is a column index into every row
            for c in 0..COLS {
                let x = (lo.ln() + (hi.ln() - lo.ln()) * c as f64 / (COLS - 1) as f64).exp();
                let row = |f: f64| ROWS - (f * ROWS as f64).round().clamp(0.0, ROWS as f64) as usize;
                if !p.truth.is_empty() {
                    grid[row(truth_cdf(&p.truth, x))][c] = b'o';
                }
                if let Some(f) = est_cdf(&p.est, x) {
                    let cell = &mut grid[row(f)][c];
                    *cell = if *cell == b'o' { b'#' } else { b'*' };
                }
            }
            let _ = writeln!(s, "  {}", p.title);
            for (i, line) in grid.iter().enumerate() {
                let label = match i {
                    0 => "1.0",
                    r if r == ROWS / 2 => "0.5",
                    r if r == ROWS => "0.0",
                    _ => "",
                };
                let _ = writeln!(s, "  {label:>4} |{}", String::from_utf8_lossy(line));
            }
            let left = fmt_delay(lo);
            let mid = fmt_delay((lo.ln() * 0.5 + hi.ln() * 0.5).exp());
            let right = fmt_delay(hi);
            let pad = (COLS / 2).saturating_sub(left.chars().count() + mid.chars().count() / 2);
            let pad2 =
                COLS.saturating_sub(left.chars().count() + pad + mid.chars().count() + right.chars().count());
            let _ = writeln!(s, "       {left}{}{mid}{}{right}", " ".repeat(pad), " ".repeat(pad2));
        }
        s
    }

    /// One SVG document with a panel per point and kind.
    pub fn svg(&self) -> String {
        const W: f64 = 720.0;
        const PH: f64 = 250.0;
        const ML: f64 = 60.0;
        const MR: f64 = 20.0;
        const MT: f64 = 30.0;
        const MB: f64 = 40.0;
        let height = (self.panels.len().max(1) as f64) * PH + 40.0;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" viewBox="0 0 {W} {height}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="15">wirelat demo: fridge request→response delay CDFs</text>"#,
            W / 2.0
        );
        if self.panels.is_empty() {
            let _ = writeln!(s, r#"<text x="20" y="60">no request/response exchanges in this trace</text>"#);
        }
        for (i, p) in self.panels.iter().enumerate() {
            let top = 40.0 + i as f64 * PH;
            let (x0, y0, pw, ph) = (ML, top + MT, W - ML - MR, PH - MT - MB);
            let (lo, hi) = p.range();
            let sx = |x: f64| x0 + (x.max(lo).ln() - lo.ln()) / (hi.ln() - lo.ln()) * pw;
            let sy = |f: f64| y0 + (1.0 - f) * ph;
            let _ =
                writeln!(s, r#"<text x="{x0}" y="{}" font-size="13">{}</text>"#, top + 18.0, xml(&p.title));
            let _ = writeln!(
                s,
                r##"<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>"##
            );
            for f in [0.25, 0.5, 0.75] {
                let _ = writeln!(
                    s,
                    r##"<line x1="{x0}" x2="{}" y1="{y}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{f}</text>"##,
                    x0 + pw,
                    x0 - 6.0,
                    sy(f) + 4.0,
                    y = sy(f)
                );
            }
            let mut decade = 10f64.powf(lo.log10().ceil());
            while decade <= hi {
                let x = sx(decade);
                let _ = writeln!(
                    s,
                    r##"<line x1="{x}" x2="{x}" y1="{y0}" y2="{}" stroke="#ddd"/><text x="{x}" y="{}" text-anchor="middle">{}</text>"##,
                    y0 + ph,
                    y0 + ph + 16.0,
                    xml(&fmt_delay(decade))
                );
                decade *= 10.0;
            }
            if !p.truth.is_empty() {
                // The empirical CDF as a step function.
                let mut pts = format!("{:.1},{:.1}", sx(lo), sy(0.0));
                let n = p.truth.len() as f64;
                for (k, &d) in p.truth.iter().enumerate() {
                    let _ = write!(
                        pts,
                        " {:.1},{:.1} {:.1},{:.1}",
                        sx(d),
                        sy(k as f64 / n),
                        sx(d),
                        sy((k + 1) as f64 / n)
                    );
                }
                let _ = write!(pts, " {:.1},{:.1}", sx(hi), sy(1.0));
                let _ = writeln!(
                    s,
                    r##"<polyline points="{pts}" fill="none" stroke="#1f77b4" stroke-width="2"/>"##
                );
            }
            if !p.est.is_empty() {
                let pts: Vec<String> =
                    p.est.iter().map(|&(x, f)| format!("{:.1},{:.1}", sx(x), sy(f))).collect();
                let _ = writeln!(
                    s,
                    r##"<polyline points="{}" fill="none" stroke="#d62728" stroke-width="2" stroke-dasharray="6 3"/>"##,
                    pts.join(" ")
                );
            }
            let lx = x0 + 10.0;
            let ly = y0 + 14.0;
            let _ = writeln!(
                s,
                r##"<line x1="{lx}" x2="{}" y1="{ly}" y2="{ly}" stroke="#1f77b4" stroke-width="2"/><text x="{}" y="{}">truth</text>"##,
                lx + 24.0,
                lx + 30.0,
                ly + 4.0
            );
            let _ = writeln!(
                s,
                r##"<line x1="{lx}" x2="{}" y1="{}" y2="{}" stroke="#d62728" stroke-width="2" stroke-dasharray="6 3"/><text x="{}" y="{}">fridge estimate</text>"##,
                lx + 24.0,
                ly + 16.0,
                ly + 16.0,
                lx + 30.0,
                ly + 20.0
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

fn xml(t: &str) -> String {
    t.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimated_cdf_rises_to_the_closed_mass_and_interpolates_in_log_delay() {
        let mut bins = Bins::new();
        bins.insert((1_000, Some(2_000)), 1.0);
        bins.insert((2_000, Some(4_000)), 2.0);
        bins.insert((4_000, None), 1.0);
        let v = cdf_vertices(&bins);
        assert_eq!(v, vec![(1_000.0, 0.0), (2_000.0, 0.25), (4_000.0, 0.75)]);
        assert_eq!(est_cdf(&v, 500.0), Some(0.0));
        let mid = est_cdf(&v, (2_000f64 * 4_000.0).sqrt()).unwrap();
        assert!((mid - 0.5).abs() < 1e-12, "{mid}");
        assert_eq!(est_cdf(&v, 1e9), Some(0.75));
    }

    #[test]
    fn truth_cdf_is_the_fraction_at_or_below() {
        let t = [1.0, 2.0, 2.0, 5.0];
        assert_eq!(truth_cdf(&t, 0.5), 0.0);
        assert_eq!(truth_cdf(&t, 2.0), 0.75);
        assert_eq!(truth_cdf(&t, 9.0), 1.0);
    }
}
