//! Compact command-line forms of the generator's models.
//!
//! - Durations: a number with an optional unit `ns` (default), `us`, `ms`, `s`: `250us`, `1.5ms`.
//!   Signed durations (clock offsets) may start with `-`.
//! - Delay models (times are durations): `constant:50us`, `weibull:shape=0.6,mean=50us`,
//!   `pareto:shape=3,mean=50us`, `lognormal:mu=10.8,sigma=0.5` (mu of ln ns),
//!   `bimodal:low=20us,high=200us,p=0.1`,
//!   `lognormal_mix:mu_low=9.9,sigma_low=0.3,mu_high=12.2,sigma_high=0.6,p=0.05` (two
//!   log-normals, mu of ln ns), `uniform:low=10us,high=90us`,
//!   `queue:rate_bps=1e9,prop=20us`.
//! - Loss models: `none`, `uniform:0.01` (or `uniform:rate=0.01`), `bursty:rate=0.01,burst=100`.
//! - Reordering: `FRACTION/DELAY`, e.g. `0.01/uniform:low=50us,high=500us`.
//! - Per-flow paths: `WEIGHT:EXTRA,...`, e.g. `0.7:0,0.3:200us` (70 % of flows on a path with
//!   no extra delay, 30 % on one with 200 µs more).

use crate::error::{Result, TraceError};
use crate::segment::{DelaySpec, PathClass, QueueModel, ReorderSpec};
use std::collections::HashMap;
use wirelat_dataplane::sim::{DelayModel, LossModel};

fn err(what: &'static str, input: &str, detail: impl Into<String>) -> TraceError {
    TraceError::Spec { what, input: input.into(), detail: detail.into() }
}

/// A non-negative duration in ns (fractional ns are rounded).
pub fn duration_ns(s: &str) -> Result<u64> {
    let v = signed_duration_ns(s)?;
    u64::try_from(v).map_err(|_| err("duration", s, "must not be negative"))
}

/// A signed duration in ns.
pub fn signed_duration_ns(s: &str) -> Result<i64> {
    let v = duration_f64(s).map_err(|d| err("duration", s, d))?;
    if v.abs() > 9e18 {
        return Err(err("duration", s, "out of range"));
    }
    Ok(v.round() as i64)
}

fn duration_f64(s: &str) -> std::result::Result<f64, String> {
    let t = s.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e9)
    } else {
        (t, 1.0)
    };
    let x: f64 = num.trim().parse().map_err(|_| format!("not a number: {num:?}"))?;
    if !x.is_finite() {
        return Err("not finite".into());
    }
    Ok(x * mult)
}

fn params<'a>(what: &'static str, input: &str, body: &'a str) -> Result<HashMap<&'a str, &'a str>> {
    let mut m = HashMap::new();
    for kv in body.split(',').filter(|x| !x.trim().is_empty()) {
        let (k, v) =
            kv.split_once('=').ok_or_else(|| err(what, input, format!("expected key=value, got {kv:?}")))?;
        if m.insert(k.trim(), v.trim()).is_some() {
            return Err(err(what, input, format!("{k} given twice")));
        }
    }
    Ok(m)
}

struct Args<'a> {
    what: &'static str,
    input: &'a str,
    map: HashMap<&'a str, &'a str>,
}

impl<'a> Args<'a> {
    fn take(&mut self, key: &str) -> Result<&'a str> {
        self.map.remove(key).ok_or_else(|| err(self.what, self.input, format!("missing {key}=")))
    }

    fn time(&mut self, key: &str) -> Result<f64> {
        let v = self.take(key)?;
        duration_f64(v).map_err(|d| err(self.what, self.input, format!("{key}: {d}")))
    }

    fn num(&mut self, key: &str) -> Result<f64> {
        let v = self.take(key)?;
        v.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| err(self.what, self.input, format!("{key}: not a number: {v:?}")))
    }

    fn done(self) -> Result<()> {
        match self.map.keys().next() {
            Some(k) => Err(err(self.what, self.input, format!("unknown parameter {k}"))),
            None => Ok(()),
        }
    }
}

/// Parses a delay model (see the module docs).
pub fn delay(s: &str) -> Result<DelaySpec> {
    const W: &str = "delay model";
    let (name, body) = s.split_once(':').unwrap_or((s, ""));
    if name == "constant" && !body.contains('=') {
        let d = duration_f64(body).map_err(|d| err(W, s, d))?;
        return checked(s, DelaySpec::Iid(DelayModel::Constant { delay: d }));
    }
    let mut a = Args { what: W, input: s, map: params(W, s, body)? };
    let spec = match name {
        "constant" => DelaySpec::Iid(DelayModel::Constant { delay: a.time("delay")? }),
        "weibull" => DelaySpec::Iid(DelayModel::Weibull { shape: a.num("shape")?, mean: a.time("mean")? }),
        "pareto" => DelaySpec::Iid(DelayModel::Pareto { shape: a.num("shape")?, mean: a.time("mean")? }),
        "lognormal" => DelaySpec::Iid(DelayModel::LogNormal { mu: a.num("mu")?, sigma: a.num("sigma")? }),
        "bimodal" => DelaySpec::Iid(DelayModel::Bimodal {
            low_mean: a.time("low")?,
            high_mean: a.time("high")?,
            p_high: a.num("p")?,
        }),
        "lognormal_mix" => DelaySpec::Iid(DelayModel::LogNormalMix {
            mu_low: a.num("mu_low")?,
            sigma_low: a.num("sigma_low")?,
            mu_high: a.num("mu_high")?,
            sigma_high: a.num("sigma_high")?,
            p_high: a.num("p")?,
        }),
        "uniform" => DelaySpec::Iid(DelayModel::Uniform { low: a.time("low")?, high: a.time("high")? }),
        "queue" => DelaySpec::Queue(QueueModel::Queue {
            service_rate_bps: a.num("rate_bps")?,
            propagation_ns: {
                let p = a.time("prop")?;
                if p < 0.0 {
                    return Err(err(W, s, "prop must not be negative"));
                }
                p.round() as u64
            },
        }),
        other => {
            return Err(err(
                W,
                s,
                format!(
                    "unknown model {other:?} (constant, weibull, pareto, lognormal, lognormal_mix, bimodal, uniform, queue)"
                ),
            ));
        }
    };
    a.done()?;
    checked(s, spec)
}

fn checked(s: &str, spec: DelaySpec) -> Result<DelaySpec> {
    let probe = crate::segment::SegmentConfig {
        delay: spec,
        loss: LossModel::None,
        fifo: false,
        reorder: None,
        paths: vec![],
    };
    probe.validate().map_err(|e| err("delay model", s, e.to_string()))?;
    Ok(spec)
}

/// Parses a loss model (see the module docs).
pub fn loss(s: &str) -> Result<LossModel> {
    const W: &str = "loss model";
    let (name, body) = s.split_once(':').unwrap_or((s, ""));
    let m = match name {
        "none" if body.is_empty() => LossModel::None,
        "uniform" if !body.contains('=') => {
            LossModel::Uniform { rate: body.trim().parse().map_err(|_| err(W, s, "rate is not a number"))? }
        }
        "uniform" => {
            let mut a = Args { what: W, input: s, map: params(W, s, body)? };
            let m = LossModel::Uniform { rate: a.num("rate")? };
            a.done()?;
            m
        }
        "bursty" => {
            let mut a = Args { what: W, input: s, map: params(W, s, body)? };
            let m = LossModel::Bursty { rate: a.num("rate")?, mean_burst: a.num("burst")? };
            a.done()?;
            m
        }
        _ => return Err(err(W, s, "expected none, uniform:RATE or bursty:rate=R,burst=B")),
    };
    let probe = crate::segment::SegmentConfig {
        delay: DelaySpec::Iid(DelayModel::Constant { delay: 0.0 }),
        loss: m,
        fifo: false,
        reorder: None,
        paths: vec![],
    };
    probe.validate().map_err(|e| err(W, s, e.to_string()))?;
    Ok(m)
}

/// Parses a reordering spec `FRACTION/DELAY`.
pub fn reorder(s: &str) -> Result<ReorderSpec> {
    const W: &str = "reordering";
    let (f, d) = s.split_once('/').ok_or_else(|| err(W, s, "expected FRACTION/DELAY"))?;
    let fraction: f64 = f.trim().parse().map_err(|_| err(W, s, "fraction is not a number"))?;
    if !(0.0..=1.0).contains(&fraction) {
        return Err(err(W, s, "fraction not in [0, 1]"));
    }
    match delay(d)? {
        DelaySpec::Iid(extra) => Ok(ReorderSpec { fraction, extra }),
        DelaySpec::Queue(_) => Err(err(W, s, "the extra delay cannot be a queue")),
    }
}

/// Parses per-flow paths `WEIGHT:EXTRA,...`.
pub fn paths(s: &str) -> Result<Vec<PathClass>> {
    const W: &str = "paths";
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.trim().is_empty()) {
        let (w, d) =
            part.split_once(':').ok_or_else(|| err(W, s, format!("expected WEIGHT:EXTRA, got {part:?}")))?;
        let weight: f64 = w.trim().parse().map_err(|_| err(W, s, format!("weight {w:?} is not a number")))?;
        if !(weight.is_finite() && weight >= 0.0) {
            return Err(err(W, s, "weights must be non-negative"));
        }
        out.push(PathClass { weight, extra_delay_ns: duration_ns(d)? });
    }
    if out.iter().map(|p| p.weight).sum::<f64>() <= 0.0 {
        return Err(err(W, s, "need at least one path with a positive weight"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration_ns("250us").unwrap(), 250_000);
        assert_eq!(duration_ns("1.5ms").unwrap(), 1_500_000);
        assert_eq!(duration_ns("2s").unwrap(), 2_000_000_000);
        assert_eq!(duration_ns("17").unwrap(), 17);
        assert_eq!(signed_duration_ns("-3us").unwrap(), -3000);
        assert!(duration_ns("-3us").is_err());
        assert!(duration_ns("fast").is_err());
        assert!(duration_ns("1e30s").is_err());
    }

    #[test]
    fn delay_models() {
        assert_eq!(delay("constant:50us").unwrap(), DelaySpec::Iid(DelayModel::Constant { delay: 50_000.0 }));
        assert_eq!(
            delay("weibull:shape=0.6,mean=50us").unwrap(),
            DelaySpec::Iid(DelayModel::Weibull { shape: 0.6, mean: 50_000.0 })
        );
        assert_eq!(
            delay("queue:rate_bps=1e9,prop=20us").unwrap(),
            DelaySpec::Queue(QueueModel::Queue { service_rate_bps: 1e9, propagation_ns: 20_000 })
        );
        assert!(delay("pareto:shape=0.5,mean=1us").is_err());
        assert!(delay("weibull:shape=0.6").is_err());
        assert!(delay("weibull:shape=0.6,mean=1us,bogus=1").is_err());
        assert!(delay("gaussian:mean=1").is_err());
    }

    #[test]
    fn loss_and_reorder() {
        assert_eq!(loss("none").unwrap(), LossModel::None);
        assert_eq!(loss("uniform:0.01").unwrap(), LossModel::Uniform { rate: 0.01 });
        assert_eq!(
            loss("bursty:rate=0.01,burst=100").unwrap(),
            LossModel::Bursty { rate: 0.01, mean_burst: 100.0 }
        );
        assert!(loss("uniform:2").is_err());
        assert!(loss("bursty:rate=0.01").is_err());
        let r = reorder("0.05/uniform:low=1us,high=2us").unwrap();
        assert_eq!(r.fraction, 0.05);
        assert!(reorder("0.05").is_err());
        assert!(reorder("1.5/constant:1us").is_err());
        let p = paths("0.7:0,0.3:200us").unwrap();
        assert_eq!(
            p,
            vec![
                PathClass { weight: 0.7, extra_delay_ns: 0 },
                PathClass { weight: 0.3, extra_delay_ns: 200_000 }
            ]
        );
        assert!(paths("0.7").is_err());
        assert!(paths("0:1us").is_err());
        assert!(paths("-1:1us,2:0").is_err());
    }
}
