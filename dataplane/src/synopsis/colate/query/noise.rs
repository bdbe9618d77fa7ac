//! The whole-vector noise sums of a segment: what foreign packets put into any one cell, and
//! the clean reference cells a query subtracts.

/// Per-cell noise statistics of a segment: the whole vector of Δ_i = R_i − S_i describes what
/// foreign packets put into any one cell, including the flow's own.
#[derive(Clone, Debug, Default)]
pub(super) struct NoiseSums {
    pub(super) sum_d: f64,
    pub(super) sum_d2: f64,
    /// With counts: packets at R minus packets at S.
    pub(super) count_difference: i128,
    /// With counts: the 99.5 % quantile of the clean cells' counts; part of the count a flow's
    /// cell may hold beyond the flow's own share before it counts as holding a chunk of
    /// another large flow.
    pub(super) k_cut: u64,
    /// With counts: the clean cells (counts agree at S and R, Δ passes the floor, see
    /// [`Segment::with_floor`]) summed by count, cumulatively: entry (k, sums) holds every clean
    /// cell with at most k packets. A query takes as reference the cells with at most the
    /// foreign allowance of its flow's cells (what foreign packets may add to one of them), so
    /// the noise it subtracts and the variance it reports describe the cells it uses: leaving
    /// out every cell above a fixed quantile (as before) hid clustered foreign packets (a
    /// chunk of one flow in one cell) and left no reference at all in a sparse vector.
    pub(super) reference: Vec<(u64, RefSums)>,
}

impl NoiseSums {
    /// The clean cells with at most `k` packets.
    pub(super) fn reference_upto(&self, k: f64) -> RefSums {
        let i = self.reference.partition_point(|&(c, _)| c as f64 <= k);
        i.checked_sub(1).map_or_else(RefSums::default, |i| self.reference[i].1)
    }
}

/// Sums over reference cells of Δ (exact and f64), K (the cell's packet count) and products.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RefSums {
    pub(super) cells: u64,
    pub(super) d_exact: i128,
    pub(super) k: f64,
    pub(super) d2: f64,
    pub(super) dk: f64,
    pub(super) k2: f64,
}

impl RefSums {
    pub(super) fn merge(&mut self, o: &RefSums) {
        self.cells += o.cells;
        self.d_exact += o.d_exact;
        self.k += o.k;
        self.d2 += o.d2;
        self.dk += o.dk;
        self.k2 += o.k2;
    }

    pub(super) fn add(&mut self, d: i128, k: u64, sign: f64) {
        let (df, kf) = (d as f64, k as f64);
        if sign > 0.0 {
            self.cells += 1;
            self.d_exact += d;
        } else {
            self.cells = self.cells.saturating_sub(1);
            self.d_exact -= d;
        }
        self.k += sign * kf;
        self.d2 += sign * df * df;
        self.dk += sign * df * kf;
        self.k2 += sign * kf * kf;
    }

    /// Mean Δ and mean K per cell.
    pub(super) fn means(&self) -> (f64, f64) {
        let c = self.cells.max(1) as f64;
        (self.d_exact as f64 / c, self.k / c)
    }

    /// The packets' latency variance, pooled over the cells: Σ (Δ_i − μ_p·K_i)² / Σ K_i with
    /// μ_p = Σ Δ_i / Σ K_i (a cell of K independent packets has variance K·σ² about K·μ_p).
    /// Where flows differ in mean latency it includes that spread too, so it errs wide.
    pub(super) fn per_packet_variance(&self) -> f64 {
        if self.k < 1.0 {
            return 0.0;
        }
        let mu = self.d_exact as f64 / self.k;
        ((self.d2 - 2.0 * mu * self.dk + mu * mu * self.k2) / self.k).max(0.0)
    }

    /// Variance over the cells of Δ_i − μ·K_i: the foreign noise a cell carries for a flow of
    /// mean μ.
    pub(super) fn variance(&self, mu: f64) -> f64 {
        let c = self.cells.max(1) as f64;
        let (md, mk) = self.means();
        ((self.d2 - 2.0 * mu * self.dk + mu * mu * self.k2) / c - (md - mu * mk).powi(2)).max(0.0)
    }
}
