//! Seeded simulation of what a measured segment does to packets: per-packet delay models and
//! loss models.
//!
//! This is the ground truth side of wirelat: the statistical tests, the papers' reproductions
//! and the trace generator draw delays and losses from here. Everything is driven by an
//! explicitly seeded, platform-stable generator ([`rng`]) so a seed names one exact trace.
//! No I/O.

use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal, Pareto, Weibull};
use serde::{Deserialize, Serialize};

/// The generator every simulation uses: PCG-64 (`rand_pcg::Pcg64Mcg`), whose output is fixed
/// for a seed on every platform.
pub type SimRng = rand_pcg::Pcg64Mcg;

/// A generator for `seed`.
pub fn rng(seed: u64) -> SimRng {
    use rand::SeedableRng;
    SimRng::seed_from_u64(seed)
}

/// Γ(x) for x > 0 (Lanczos, g = 7, n = 9; relative error below 1e-13 on the range used here).
pub fn gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection keeps the series in its accurate range.
        std::f64::consts::PI / ((std::f64::consts::PI * x).sin() * gamma(1.0 - x))
    } else {
        let x = x - 1.0;
        let mut a = C[0];
        let t = x + G + 0.5;
        for (i, c) in C.iter().enumerate().skip(1) {
            a += c / (x + i as f64);
        }
        (2.0 * std::f64::consts::PI).sqrt() * t.powf(x + 0.5) * (-t).exp() * a
    }
}

/// A per-packet delay distribution, parameterised by its mean where that is natural.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum DelayModel {
    /// Every packet takes `delay` time units.
    Constant {
        /// The delay.
        delay: f64,
    },
    /// Weibull with shape `shape` scaled to mean `mean` (LDA paper: shape 0.6–0.8).
    Weibull {
        /// Shape β.
        shape: f64,
        /// Mean.
        mean: f64,
    },
    /// Pareto with shape `shape` (> 1) scaled to mean `mean` (LDA paper: shape 3–5).
    Pareto {
        /// Shape β.
        shape: f64,
        /// Mean.
        mean: f64,
    },
    /// Log-normal: ln(delay) ~ N(`mu`, `sigma`²).
    LogNormal {
        /// Mean of ln(delay).
        mu: f64,
        /// Std-dev of ln(delay).
        sigma: f64,
    },
    /// With probability `p_high` an exponential around `high_mean`, else around `low_mean`
    /// (two path classes; the LDS paper's bimodal delays).
    Bimodal {
        /// Mean of the low mode.
        low_mean: f64,
        /// Mean of the high mode.
        high_mean: f64,
        /// Probability of the high mode.
        p_high: f64,
    },
    /// A mixture of two log-normals: with probability `p_high`, ln(delay) ~ N(`mu_high`,
    /// `sigma_high`²), else N(`mu_low`, `sigma_low`²) (a fast path and a congested one, each
    /// skewed; issue 18's "log-normal mixture").
    LogNormalMix {
        /// Mean of ln(delay), low component.
        mu_low: f64,
        /// Std-dev of ln(delay), low component.
        sigma_low: f64,
        /// Mean of ln(delay), high component.
        mu_high: f64,
        /// Std-dev of ln(delay), high component.
        sigma_high: f64,
        /// Probability of the high component.
        p_high: f64,
    },
    /// Uniform on [`low`, `high`).
    Uniform {
        /// Lower bound.
        low: f64,
        /// Upper bound.
        high: f64,
    },
}

impl DelayModel {
    /// The distribution's mean (analytic).
    pub fn mean(&self) -> f64 {
        match *self {
            DelayModel::Constant { delay } => delay,
            DelayModel::Weibull { mean, .. } | DelayModel::Pareto { mean, .. } => mean,
            DelayModel::LogNormal { mu, sigma } => (mu + sigma * sigma / 2.0).exp(),
            DelayModel::Bimodal { low_mean, high_mean, p_high } => {
                (1.0 - p_high) * low_mean + p_high * high_mean
            }
            DelayModel::LogNormalMix { mu_low, sigma_low, mu_high, sigma_high, p_high } => {
                (1.0 - p_high) * (mu_low + sigma_low * sigma_low / 2.0).exp()
                    + p_high * (mu_high + sigma_high * sigma_high / 2.0).exp()
            }
            DelayModel::Uniform { low, high } => (low + high) / 2.0,
        }
    }

    /// The distribution's standard deviation (analytic; infinite for Pareto shape ≤ 2).
    pub fn std_dev(&self) -> f64 {
        match *self {
            DelayModel::Constant { .. } => 0.0,
            DelayModel::Weibull { shape, mean } => {
                let g1 = gamma(1.0 + 1.0 / shape);
                let scale = mean / g1;
                scale * (gamma(1.0 + 2.0 / shape) - g1 * g1).sqrt()
            }
            DelayModel::Pareto { shape, mean } => {
                if shape <= 2.0 {
                    return f64::INFINITY;
                }
                let scale = mean * (shape - 1.0) / shape;
                scale / (shape - 1.0) * (shape / (shape - 2.0)).sqrt()
            }
            DelayModel::LogNormal { mu, sigma } => {
                ((sigma * sigma).exp_m1() * (2.0 * mu + sigma * sigma).exp()).sqrt()
            }
            DelayModel::Bimodal { low_mean, high_mean, p_high } => {
                // Mixture of exponentials: E[X²] = 2·mean² per mode.
                let m = self.mean();
                let ex2 = (1.0 - p_high) * 2.0 * low_mean * low_mean + p_high * 2.0 * high_mean * high_mean;
                (ex2 - m * m).max(0.0).sqrt()
            }
            DelayModel::LogNormalMix { mu_low, sigma_low, mu_high, sigma_high, p_high } => {
                // E[X²] of a log-normal is exp(2μ + 2σ²).
                let m = self.mean();
                let ex2 = (1.0 - p_high) * (2.0 * mu_low + 2.0 * sigma_low * sigma_low).exp()
                    + p_high * (2.0 * mu_high + 2.0 * sigma_high * sigma_high).exp();
                (ex2 - m * m).max(0.0).sqrt()
            }
            DelayModel::Uniform { low, high } => (high - low) / 12f64.sqrt(),
        }
    }

    /// A sampler for this model; `None` if a parameter is out of range.
    pub fn sampler(&self) -> Option<DelaySampler> {
        let inner = match *self {
            DelayModel::Constant { delay } if delay >= 0.0 => Sampler::Constant(delay),
            DelayModel::Weibull { shape, mean } if shape > 0.0 && mean > 0.0 => {
                Sampler::Weibull(Weibull::new(mean / gamma(1.0 + 1.0 / shape), shape).ok()?)
            }
            DelayModel::Pareto { shape, mean } if shape > 1.0 && mean > 0.0 => {
                Sampler::Pareto(Pareto::new(mean * (shape - 1.0) / shape, shape).ok()?)
            }
            DelayModel::LogNormal { mu, sigma } if sigma >= 0.0 => {
                Sampler::LogNormal(LogNormal::new(mu, sigma).ok()?)
            }
            DelayModel::Bimodal { low_mean, high_mean, p_high }
                if low_mean > 0.0 && high_mean > 0.0 && (0.0..=1.0).contains(&p_high) =>
            {
                Sampler::Bimodal(Exp::new(1.0 / low_mean).ok()?, Exp::new(1.0 / high_mean).ok()?, p_high)
            }
            DelayModel::LogNormalMix { mu_low, sigma_low, mu_high, sigma_high, p_high }
                if (0.0..=1.0).contains(&p_high) =>
            {
                Sampler::LogNormalMix(
                    LogNormal::new(mu_low, sigma_low).ok()?,
                    LogNormal::new(mu_high, sigma_high).ok()?,
                    p_high,
                )
            }
            DelayModel::Uniform { low, high } if low >= 0.0 && high > low => Sampler::Uniform(low, high),
            _ => return None,
        };
        Some(DelaySampler(inner))
    }
}

/// Draws delays from a [`DelayModel`].
#[derive(Clone, Copy, Debug)]
pub struct DelaySampler(Sampler);

#[derive(Clone, Copy, Debug)]
enum Sampler {
    Constant(f64),
    Weibull(Weibull<f64>),
    Pareto(Pareto<f64>),
    LogNormal(LogNormal<f64>),
    Bimodal(Exp<f64>, Exp<f64>, f64),
    LogNormalMix(LogNormal<f64>, LogNormal<f64>, f64),
    Uniform(f64, f64),
}

impl DelaySampler {
    /// One delay (non-negative).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match &self.0 {
            Sampler::Constant(d) => *d,
            Sampler::Weibull(w) => w.sample(rng),
            Sampler::Pareto(p) => p.sample(rng),
            Sampler::LogNormal(l) => l.sample(rng),
            Sampler::Bimodal(lo, hi, p) => {
                if rng.random::<f64>() < *p {
                    hi.sample(rng)
                } else {
                    lo.sample(rng)
                }
            }
            Sampler::LogNormalMix(lo, hi, p) => {
                if rng.random::<f64>() < *p {
                    hi.sample(rng)
                } else {
                    lo.sample(rng)
                }
            }
            Sampler::Uniform(a, b) => rng.random_range(*a..*b),
        }
    }
}

/// Which packets a segment drops.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum LossModel {
    /// Nothing is lost.
    None,
    /// Each packet is lost independently with probability `rate`.
    Uniform {
        /// Loss probability.
        rate: f64,
    },
    /// Loss episodes start as a Bernoulli process over packet positions and each drops a
    /// geometric number of consecutive packets with mean `mean_burst`; the long-run lost fraction
    /// is ≈ `rate` (LDA paper: bursts of ≈100).
    Bursty {
        /// Long-run fraction lost.
        rate: f64,
        /// Mean packets per episode.
        mean_burst: f64,
    },
}

/// Decides, packet by packet, whether a [`LossModel`] drops it.
#[derive(Clone, Debug)]
pub struct LossProcess {
    model: LossModel,
    in_burst: u64,
}

impl LossProcess {
    /// A process for `model`.
    pub fn new(model: LossModel) -> Self {
        Self { model, in_burst: 0 }
    }

    /// True if the next packet is lost.
    pub fn next_lost<R: Rng + ?Sized>(&mut self, rng: &mut R) -> bool {
        match self.model {
            LossModel::None => false,
            LossModel::Uniform { rate } => rng.random::<f64>() < rate,
            LossModel::Bursty { rate, mean_burst } => {
                if self.in_burst > 0 {
                    self.in_burst -= 1;
                    return true;
                }
                let mean_burst = mean_burst.max(1.0);
                // Start probability s per free packet so that s·B / (1 + s·B) ≈ rate:
                // s = rate / (B (1 − rate)).
                let start = rate / (mean_burst * (1.0 - rate).max(1e-12));
                if rng.random::<f64>() < start {
                    // Geometric burst length with mean B (≥ 1): this packet plus the rest.
                    let q = 1.0 / mean_burst;
                    let mut len = 1u64;
                    while rng.random::<f64>() >= q && len < 1_000_000 {
                        len += 1;
                    }
                    self.in_burst = len - 1;
                    true
                } else {
                    false
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gamma_matches_known_values() {
        assert!((gamma(1.0) - 1.0).abs() < 1e-12);
        assert!((gamma(5.0) - 24.0).abs() < 1e-9);
        assert!((gamma(0.5) - std::f64::consts::PI.sqrt()).abs() < 1e-12);
        // LDA spec §7.1: scale for shape 0.6, mean 0.2 is 0.13293.
        assert!((0.2 / gamma(1.0 + 1.0 / 0.6) - 0.13293).abs() < 1e-5);
    }

    #[test]
    fn analytic_moments_match_the_spec() {
        // LDA spec §7.1: Weibull β = 0.6, mean 0.2 → sd 0.3516; Pareto β = 3 → sd 0.1155.
        let w = DelayModel::Weibull { shape: 0.6, mean: 0.2 };
        assert!((w.std_dev() - 0.3516).abs() < 1e-4);
        let p = DelayModel::Pareto { shape: 3.0, mean: 0.2 };
        assert!((p.std_dev() - 0.1155).abs() < 1e-4);
    }

    #[test]
    fn sample_means_converge() {
        // n = 200k draws: the sample mean's standard error is sd/√n; allow 5 of them.
        let n = 200_000;
        for m in [
            DelayModel::Weibull { shape: 0.8, mean: 100.0 },
            DelayModel::Pareto { shape: 4.0, mean: 100.0 },
            DelayModel::LogNormal { mu: 4.0, sigma: 0.5 },
            DelayModel::Bimodal { low_mean: 50.0, high_mean: 500.0, p_high: 0.2 },
            DelayModel::LogNormalMix {
                mu_low: 3.0,
                sigma_low: 0.3,
                mu_high: 5.0,
                sigma_high: 0.6,
                p_high: 0.1,
            },
            DelayModel::Uniform { low: 10.0, high: 30.0 },
        ] {
            let s = m.sampler().unwrap();
            let mut r = rng(7);
            let mean = (0..n).map(|_| s.sample(&mut r)).sum::<f64>() / n as f64;
            let se = m.std_dev() / (n as f64).sqrt();
            assert!((mean - m.mean()).abs() < 5.0 * se, "{m:?}: {mean} vs {}", m.mean());
        }
    }

    #[test]
    fn bad_parameters_give_no_sampler() {
        assert!(DelayModel::Pareto { shape: 1.0, mean: 1.0 }.sampler().is_none());
        assert!(DelayModel::Weibull { shape: 0.0, mean: 1.0 }.sampler().is_none());
        assert!(DelayModel::Uniform { low: 2.0, high: 1.0 }.sampler().is_none());
    }

    #[test]
    fn loss_rates_converge() {
        let n = 400_000u32;
        for (model, rate) in [
            (LossModel::Uniform { rate: 0.01 }, 0.01),
            (LossModel::Bursty { rate: 0.01, mean_burst: 100.0 }, 0.01),
        ] {
            let mut p = LossProcess::new(model);
            let mut r = rng(3);
            let lost = (0..n).filter(|_| p.next_lost(&mut r)).count() as f64 / n as f64;
            // Bursts of ~100 make the count lumpy: ~40 episodes, relative sd ≈ 1/√40 ≈ 16%;
            // allow 3 sd (50%) for bursty, and 5 binomial sd for uniform.
            let tol = if matches!(model, LossModel::Bursty { .. }) {
                0.5 * rate
            } else {
                5.0 * (rate / n as f64).sqrt()
            };
            assert!((lost - rate).abs() < tol, "{model:?}: {lost}");
        }
        assert!(!LossProcess::new(LossModel::None).next_lost(&mut rng(1)));
    }
}

/// A stationary Gaussian AR(1) process sampled on a regular grid and linearly interpolated in
/// between: the time-varying queueing delay of one path (LDS spec §11.1: step 1 ms,
/// φ = e^(−1/50), stationary std-dev 40 µs). Values may be negative (it is a deviation around a
/// base delay); the caller clamps.
#[derive(Clone, Debug, PartialEq)]
pub struct Ar1Path {
    step: f64,
    values: Vec<f64>,
}

impl Ar1Path {
    /// A path over [0, `duration`] with grid `step`, lag-one correlation `phi` (in [0, 1)) and
    /// stationary standard deviation `sd`; `None` if a parameter is out of range.
    pub fn new<R: Rng + ?Sized>(rng: &mut R, duration: f64, step: f64, phi: f64, sd: f64) -> Option<Self> {
        if !(step > 0.0 && duration >= 0.0 && (0.0..1.0).contains(&phi) && sd >= 0.0) {
            return None;
        }
        let points = (duration / step).ceil() as usize + 2;
        let normal = rand_distr::Normal::new(0.0, 1.0).ok()?;
        let innovation = sd * (1.0 - phi * phi).sqrt();
        let mut values = Vec::with_capacity(points);
        let mut x = sd * normal.sample(rng);
        for _ in 0..points {
            values.push(x);
            x = phi * x + innovation * normal.sample(rng);
        }
        Some(Self { step, values })
    }

    /// The process at time `t` (linear interpolation; held constant outside the grid).
    pub fn at(&self, t: f64) -> f64 {
        let pos = (t / self.step).max(0.0);
        let i = pos.floor() as usize;
        match (self.values.get(i), self.values.get(i + 1)) {
            (Some(a), Some(b)) => a + (b - a) * (pos - i as f64),
            (Some(a), None) => *a,
            _ => self.values.last().copied().unwrap_or(0.0),
        }
    }
}

#[cfg(test)]
mod ar1_tests {
    use super::*;

    #[test]
    fn ar1_has_the_stationary_moments() {
        // 200k grid points with φ = e^(−1/50): the effective sample size for the mean is about
        // n(1 − φ)/(1 + φ) ≈ 2,000, so the mean's sd is 40/√2000 ≈ 0.9; allow 5 of them. The
        // variance estimate's relative sd is about √(2(1 + φ²)/(n(1 − φ²))) ≈ 2.2%, so 1.1% on
        // the std-dev; allow 5 of them.
        let p = Ar1Path::new(&mut rng(11), 200_000.0, 1.0, (-1.0f64 / 50.0).exp(), 40.0).unwrap();
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|i| p.at(i as f64)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 4.5, "{mean}");
        assert!((var.sqrt() / 40.0 - 1.0).abs() < 0.056, "{}", var.sqrt());
        // Interpolation lies between the grid values.
        let mid = p.at(10.5);
        let (a, b) = (p.at(10.0), p.at(11.0));
        assert!((mid - (a + b) / 2.0).abs() < 1e-9);
        assert!(Ar1Path::new(&mut rng(1), 10.0, 0.0, 0.5, 1.0).is_none());
        assert!(Ar1Path::new(&mut rng(1), 10.0, 1.0, 1.0, 1.0).is_none());
    }
}
