//! Search strategies: they propose configs (indices into a [`SearchSpace`]), receive each
//! result as an [`Observation`], and decide what to measure next. They see nothing else, so a
//! strategy replays offline over a recorded table exactly as it ran live.
//!
//! - [`Exhaustive`]: everything (default first, then by cost hint, then in order).
//! - [`RandomSearch`]: a seeded random subset of a budget's size.
//! - [`Guided`]: with a cost hint (a template's analytic model, see [`super::cost`]): the default,
//!   then the model's best configs kept mutually distant (one per structural neighbourhood), then
//!   the open config with the best model estimate *corrected by the nearest measurement*
//!   (`hint x measured / hint` of the closest measured config), putting last the configs that lie
//!   at least as near a run-time failure as any success. Without a hint: the default and a few random
//!   configs, then a local search that expands around the fastest config found so far, with
//!   seeded random exploration and crossover of the two best. Deterministic given its seed.
//!
//! Budgets count GPU measurements: static failures (constraint, compile, resources) are
//! observed as [`Observation::Pruned`] and cost nothing.

use super::space::SearchSpace;
use serde_json::Value;

/// A cost model's estimate for a config in JSON form (lower is predicted faster).
pub trait CostModel: Send + Sync {
    /// Predicted cost, or `None` when the model has no opinion.
    fn estimate(&self, config: &Value) -> Option<f64>;
}

/// What a strategy learns about one proposed config.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// Verified and timed.
    Measured {
        /// Median time in microseconds.
        median_us: f64,
        /// Relative spread of the samples.
        rel_spread: f64,
    },
    /// Ran on the GPU but failed (wrong result, fault, timeout, crash); costs budget.
    Failed {
        /// [`super::CandidateError::kind`].
        kind: String,
    },
    /// Failed before any GPU time (constraint, compile, resources); costs no budget.
    Pruned {
        /// [`super::CandidateError::kind`].
        kind: String,
    },
}

/// How many GPU measurements a strategy may spend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// No limit (the tuner's time budget still applies).
    Unlimited,
    /// At most this many.
    Count(usize),
    /// At most this fraction of the space (floored, at least 1).
    Fraction(f64),
}

impl Budget {
    /// The measurement limit for a space of `len` configs.
    pub fn limit(&self, len: usize) -> usize {
        match *self {
            Budget::Unlimited => len,
            Budget::Count(n) => n.min(len),
            Budget::Fraction(f) => {
                let f = if f.is_finite() {
                    f.clamp(0.0, 1.0)
                } else {
                    1.0
                };
                ((f * len as f64).floor() as usize).clamp(1.min(len), len)
            }
        }
    }
}

/// A search strategy.
pub trait Strategy: Send {
    /// Name and parameters, for reports and the database entry.
    fn name(&self) -> String;
    /// Up to `want` unproposed configs to measure next; empty when the strategy is done.
    fn propose(&mut self, space: &SearchSpace, want: usize) -> Vec<usize>;
    /// The result for a config this strategy proposed.
    fn observe(&mut self, space: &SearchSpace, index: usize, observation: &Observation);
}

/// SplitMix64: a tiny PRNG whose sequence is fixed forever (replays stay reproducible across
/// crate upgrades, unlike `rand`'s small generators).
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`; 0 when `n == 0`).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Bookkeeping every strategy shares: what was proposed, what is in flight, what was charged.
#[derive(Debug, Clone, Default)]
struct Ledger {
    proposed: Vec<bool>,
    observed: Vec<bool>,
    in_flight: usize,
    charged: usize,
    limit: usize,
}

impl Ledger {
    fn init(&mut self, len: usize, limit: usize) {
        if self.proposed.len() != len {
            self.proposed = vec![false; len];
            self.observed = vec![false; len];
            self.limit = limit;
        }
    }

    fn room(&self) -> usize {
        self.limit.saturating_sub(self.charged + self.in_flight)
    }

    fn is_open(&self, i: usize) -> bool {
        self.proposed.get(i).is_some_and(|p| !p)
    }

    fn propose(&mut self, i: usize) {
        self.proposed[i] = true;
        self.in_flight += 1;
    }

    /// Returns false for an index that was not in flight.
    fn observe(&mut self, i: usize, obs: &Observation) -> bool {
        if !self.proposed.get(i).copied().unwrap_or(false) || self.observed[i] {
            return false;
        }
        self.observed[i] = true;
        self.in_flight -= 1;
        if !matches!(obs, Observation::Pruned { .. }) {
            self.charged += 1;
        }
        true
    }
}

fn hint_order(space: &SearchSpace) -> Vec<usize> {
    let mut order: Vec<usize> = (0..space.len()).collect();
    order.sort_by(|&a, &b| {
        let ha = space.hint(a).unwrap_or(f64::INFINITY);
        let hb = space.hint(b).unwrap_or(f64::INFINITY);
        ha.total_cmp(&hb).then(a.cmp(&b))
    });
    order
}

/// Measures every config: the default first, then by cost hint (when given), then in order.
#[derive(Debug, Clone, Default)]
pub struct Exhaustive {
    ledger: Ledger,
    order: Vec<usize>,
    next: usize,
}

impl Exhaustive {
    /// A new exhaustive search.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Strategy for Exhaustive {
    fn name(&self) -> String {
        "exhaustive".into()
    }

    fn propose(&mut self, space: &SearchSpace, want: usize) -> Vec<usize> {
        if self.ledger.proposed.len() != space.len() {
            self.ledger.init(space.len(), space.len());
            let mut order = hint_order(space);
            if let Some(d) = space.default_index() {
                order.retain(|&i| i != d);
                order.insert(0, d);
            }
            self.order = order;
            self.next = 0;
        }
        let mut out = Vec::new();
        while out.len() < want && self.next < self.order.len() {
            let i = self.order[self.next];
            self.next += 1;
            if self.ledger.is_open(i) {
                self.ledger.propose(i);
                out.push(i);
            }
        }
        out
    }

    fn observe(&mut self, _space: &SearchSpace, index: usize, observation: &Observation) {
        self.ledger.observe(index, observation);
    }
}

/// Measures a seeded random subset of `budget` configs.
#[derive(Debug, Clone)]
pub struct RandomSearch {
    seed: u64,
    budget: Budget,
    ledger: Ledger,
    order: Vec<usize>,
    next: usize,
}

impl RandomSearch {
    /// Random search with the given seed and budget.
    pub fn new(seed: u64, budget: Budget) -> Self {
        RandomSearch {
            seed,
            budget,
            ledger: Ledger::default(),
            order: Vec::new(),
            next: 0,
        }
    }
}

impl Strategy for RandomSearch {
    fn name(&self) -> String {
        format!("random(seed={}, budget={:?})", self.seed, self.budget)
    }

    fn propose(&mut self, space: &SearchSpace, want: usize) -> Vec<usize> {
        if self.ledger.proposed.len() != space.len() {
            self.ledger
                .init(space.len(), self.budget.limit(space.len()));
            let mut rng = SplitMix64::new(self.seed);
            let mut order: Vec<usize> = (0..space.len()).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i + 1));
            }
            self.order = order;
            self.next = 0;
        }
        let mut out = Vec::new();
        while out.len() < want && self.ledger.room() > 0 && self.next < self.order.len() {
            let i = self.order[self.next];
            self.next += 1;
            self.ledger.propose(i);
            out.push(i);
        }
        out
    }

    fn observe(&mut self, _space: &SearchSpace, index: usize, observation: &Observation) {
        self.ledger.observe(index, observation);
    }
}

/// Knobs of [`Guided`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GuidedParams {
    /// Random configs measured after the default, for a spread of starting points (no hint only).
    pub random_init: usize,
    /// Best-by-hint configs measured after the default (when a cost hint exists).
    pub hint_seeds: usize,
    /// Smallest [`SearchSpace::distance`] between two hint seeds, so the seeds cover different
    /// structural neighbourhoods instead of near-copies of the model's favourite.
    pub seed_distance: u32,
    /// Probability that a proposal is a random unmeasured config (exploration; no hint only).
    pub explore: f64,
    /// Probability that a proposal mixes the coordinates of the two fastest configs (no hint only).
    pub crossover: f64,
}

impl Default for GuidedParams {
    fn default() -> Self {
        GuidedParams {
            random_init: 3,
            hint_seeds: 5,
            seed_distance: 2,
            explore: 0.1,
            crossover: 0.15,
        }
    }
}

/// What the guided search knows around one open config: the nearest successful measurement
/// (distance and its measured / predicted ratio) and the nearest run-time failure.
#[derive(Debug, Clone, Copy)]
struct Nearest {
    ok_distance: u32,
    ok_ratio: f64,
    fail_distance: u32,
}

impl Default for Nearest {
    fn default() -> Self {
        Nearest {
            ok_distance: u32::MAX,
            ok_ratio: f64::NAN,
            fail_distance: u32::MAX,
        }
    }
}

/// Seeded local search over the space's coordinates (see the module docs).
#[derive(Debug, Clone)]
pub struct Guided {
    seed: u64,
    budget: Budget,
    params: GuidedParams,
    ledger: Ledger,
    rng: SplitMix64,
    /// Median time per index once measured (`INFINITY` for a failure).
    times: Vec<Option<f64>>,
    /// A seeded random rank per index, to break distance ties without index-order bias.
    jitter: Vec<u64>,
    seeds: Vec<usize>,
    by_coords: std::collections::HashMap<Vec<u32>, usize>,
    /// Per index, what the nearest observations say (used with a hint).
    nearest: Vec<Nearest>,
}

impl Guided {
    /// Guided search with default parameters.
    pub fn new(seed: u64, budget: Budget) -> Self {
        Self::with_params(seed, budget, GuidedParams::default())
    }

    /// Guided search with explicit parameters.
    pub fn with_params(seed: u64, budget: Budget, params: GuidedParams) -> Self {
        Guided {
            seed,
            budget,
            params,
            ledger: Ledger::default(),
            rng: SplitMix64::new(seed),
            times: Vec::new(),
            jitter: Vec::new(),
            seeds: Vec::new(),
            by_coords: Default::default(),
            nearest: Vec::new(),
        }
    }

    fn init(&mut self, space: &SearchSpace) {
        let n = space.len();
        self.ledger.init(n, self.budget.limit(n));
        self.rng = SplitMix64::new(self.seed);
        self.times = vec![None; n];
        self.jitter = (0..n).map(|_| self.rng.next_u64()).collect();
        self.by_coords = (0..n).map(|i| (space.coords(i).to_vec(), i)).collect();
        self.nearest = vec![Nearest::default(); n];
        let mut seeds = Vec::new();
        if let Some(d) = space.default_index() {
            seeds.push(d);
        }
        if space.has_hint() {
            let first = seeds.len();
            for i in hint_order(space)
                .into_iter()
                .filter(|&i| space.hint(i).is_some())
            {
                if seeds.len() - first >= self.params.hint_seeds {
                    break;
                }
                if seeds
                    .iter()
                    .all(|&s| space.distance(s, i) >= self.params.seed_distance.max(1))
                {
                    seeds.push(i);
                }
            }
            seeds.reverse(); // popped from the back
            self.seeds = seeds;
            return;
        }
        let mut tries = 0;
        let want = seeds.len() + self.params.random_init;
        while seeds.len() < want.min(n) && tries < 16 * want {
            let i = self.rng.below(n);
            if !seeds.contains(&i) {
                seeds.push(i);
            }
            tries += 1;
        }
        seeds.reverse(); // popped from the back
        self.seeds = seeds;
    }

    /// Measured configs, fastest first (failures excluded).
    fn elites(&self) -> Vec<usize> {
        let mut e: Vec<usize> = (0..self.times.len())
            .filter(|&i| self.times[i].is_some_and(f64::is_finite))
            .collect();
        e.sort_by(|&a, &b| {
            let (ta, tb) = (
                self.times[a].unwrap_or(f64::INFINITY),
                self.times[b].unwrap_or(f64::INFINITY),
            );
            ta.total_cmp(&tb).then(a.cmp(&b))
        });
        e
    }

    fn random_open(&mut self) -> Option<usize> {
        let open: Vec<usize> = (0..self.times.len())
            .filter(|&i| self.ledger.is_open(i))
            .collect();
        if open.is_empty() {
            None
        } else {
            Some(open[self.rng.below(open.len())])
        }
    }

    fn nearest_open(&self, space: &SearchSpace, center: usize) -> Option<usize> {
        (0..space.len())
            .filter(|&i| self.ledger.is_open(i))
            .min_by(|&a, &b| {
                let ha = space.hint(a).unwrap_or(f64::INFINITY);
                let hb = space.hint(b).unwrap_or(f64::INFINITY);
                space
                    .distance(center, a)
                    .cmp(&space.distance(center, b))
                    .then(ha.total_cmp(&hb))
                    .then(self.jitter[a].cmp(&self.jitter[b]))
            })
    }

    fn crossover_open(&mut self, space: &SearchSpace, a: usize, b: usize) -> Option<usize> {
        let (ca, cb) = (space.coords(a), space.coords(b));
        for _ in 0..8 {
            let child: Vec<u32> = ca
                .iter()
                .zip(cb)
                .map(|(x, y)| if self.rng.unit() < 0.5 { *x } else { *y })
                .collect();
            if let Some(&i) = self.by_coords.get(&child) {
                if self.ledger.is_open(i) {
                    return Some(i);
                }
            }
        }
        None
    }

    /// With a hint: the open config with the lowest hint corrected by its nearest measurement,
    /// configs at least as near a run-time failure as any success last.
    fn model_pick(&self, space: &SearchSpace) -> Option<usize> {
        let score = |i: usize| {
            let near = self.nearest[i];
            let suspect = near.fail_distance <= near.ok_distance;
            let hint = space.hint(i).unwrap_or(f64::INFINITY);
            let corrected = if near.ok_ratio.is_finite() {
                hint * near.ok_ratio
            } else {
                hint
            };
            (suspect, corrected)
        };
        (0..space.len())
            .filter(|&i| self.ledger.is_open(i))
            .min_by(|&a, &b| {
                let ((sa, ca), (sb, cb)) = (score(a), score(b));
                sa.cmp(&sb)
                    .then(ca.total_cmp(&cb))
                    .then(self.jitter[a].cmp(&self.jitter[b]))
            })
    }

    /// Records an observation of `index` in every config's [`Nearest`].
    fn note_nearest(&mut self, space: &SearchSpace, index: usize, observation: &Observation) {
        match observation {
            Observation::Measured { median_us, .. } if median_us.is_finite() => {
                let ratio = space
                    .hint(index)
                    .filter(|h| *h > 0.0)
                    .map_or(f64::NAN, |h| median_us / h);
                for (i, near) in self.nearest.iter_mut().enumerate() {
                    let d = space.distance(index, i);
                    if d < near.ok_distance {
                        near.ok_distance = d;
                        near.ok_ratio = ratio;
                    }
                }
            }
            Observation::Pruned { .. } => {}
            _ => {
                for (i, near) in self.nearest.iter_mut().enumerate() {
                    near.fail_distance = near.fail_distance.min(space.distance(index, i));
                }
            }
        }
    }

    fn pick(&mut self, space: &SearchSpace) -> Option<usize> {
        while let Some(s) = self.seeds.pop() {
            if self.ledger.is_open(s) {
                return Some(s);
            }
        }
        if space.has_hint() {
            return self.model_pick(space);
        }
        let elites = self.elites();
        let Some(&best) = elites.first() else {
            return self.random_open();
        };
        let roll = self.rng.unit();
        if roll < self.params.explore {
            return self.random_open();
        }
        if roll < self.params.explore + self.params.crossover && elites.len() >= 2 {
            if let Some(i) = self.crossover_open(space, best, elites[1]) {
                return Some(i);
            }
        }
        self.nearest_open(space, best)
    }
}

impl Strategy for Guided {
    fn name(&self) -> String {
        format!(
            "guided(seed={}, budget={:?}, {:?})",
            self.seed, self.budget, self.params
        )
    }

    fn propose(&mut self, space: &SearchSpace, want: usize) -> Vec<usize> {
        if self.times.len() != space.len() {
            self.init(space);
        }
        let mut out = Vec::new();
        while out.len() < want && self.ledger.room() > 0 {
            match self.pick(space) {
                Some(i) => {
                    self.ledger.propose(i);
                    out.push(i);
                }
                None => break,
            }
        }
        out
    }

    fn observe(&mut self, space: &SearchSpace, index: usize, observation: &Observation) {
        if !self.ledger.observe(index, observation) {
            return;
        }
        if self.nearest.len() == space.len() {
            self.note_nearest(space, index, observation);
        }
        self.times[index] = Some(match observation {
            Observation::Measured { median_us, .. } if median_us.is_finite() => *median_us,
            _ => f64::INFINITY,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// SYNTHETIC landscape for testing the strategy mechanics only (not measured data).
    fn synthetic_space() -> (SearchSpace, Vec<f64>) {
        let mut configs = Vec::new();
        let mut cost = Vec::new();
        for bm in [16, 32, 64, 128, 256] {
            for bn in [16, 32, 64, 128, 256] {
                for stages in 1..=6 {
                    for swizzle in [false, true] {
                        configs.push(
                            json!({"bm": bm, "bn": bn, "stages": stages, "swizzle": swizzle}),
                        );
                        let l = |x: f64, opt: f64| (x.log2() - opt).powi(2);
                        cost.push(
                            10.0 + l(bm as f64, 7.0)
                                + 2.0 * l(bn as f64, 6.0)
                                + (stages as f64 - 4.0).powi(2) * 0.3
                                - if swizzle { 0.4 } else { 0.0 },
                        );
                    }
                }
            }
        }
        (SearchSpace::new(configs).with_default(Some(0)), cost)
    }

    fn drive(s: &mut dyn Strategy, space: &SearchSpace, cost: &[f64], batch: usize) -> Vec<usize> {
        let mut seen = Vec::new();
        loop {
            let p = s.propose(space, batch);
            if p.is_empty() {
                return seen;
            }
            for i in p {
                seen.push(i);
                s.observe(
                    space,
                    i,
                    &Observation::Measured {
                        median_us: cost[i],
                        rel_spread: 0.0,
                    },
                );
            }
        }
    }

    #[test]
    fn budgets_floor_and_clamp() {
        assert_eq!(Budget::Fraction(0.15).limit(100), 15);
        assert_eq!(Budget::Fraction(0.15).limit(5), 1);
        assert_eq!(Budget::Fraction(0.15).limit(0), 0);
        assert_eq!(Budget::Count(500).limit(20), 20);
        assert_eq!(Budget::Unlimited.limit(7), 7);
    }

    #[test]
    fn splitmix_sequence_is_fixed() {
        // Reference values of SplitMix64 seeded with 0 (Vigna's reference implementation).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert!((0..1000).all(|_| r.unit() < 1.0));
    }

    #[test]
    fn exhaustive_proposes_everything_once_default_first() {
        let (space, cost) = synthetic_space();
        let seen = drive(&mut Exhaustive::new(), &space, &cost, 7);
        assert_eq!(seen.len(), space.len());
        assert_eq!(seen[0], 0);
        let mut sorted = seen.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), space.len());
    }

    #[test]
    fn exhaustive_follows_the_hint() {
        let space = SearchSpace::new(vec![json!(0), json!(1), json!(2)])
            .with_hint(vec![3.0, 1.0, 2.0])
            .unwrap();
        let seen = drive(&mut Exhaustive::new(), &space, &[0.0; 3], 1);
        assert_eq!(seen, vec![1, 2, 0]);
    }

    #[test]
    fn random_is_seeded_distinct_and_bounded() {
        let (space, cost) = synthetic_space();
        let a = drive(
            &mut RandomSearch::new(7, Budget::Count(20)),
            &space,
            &cost,
            3,
        );
        let b = drive(
            &mut RandomSearch::new(7, Budget::Count(20)),
            &space,
            &cost,
            5,
        );
        let c = drive(
            &mut RandomSearch::new(8, Budget::Count(20)),
            &space,
            &cost,
            3,
        );
        assert_eq!(a.len(), 20);
        assert_eq!(a, b, "same seed, same configs, whatever the batch size");
        assert_ne!(a, c);
        let mut d = a.clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), 20);
    }

    #[test]
    fn pruned_results_do_not_cost_budget() {
        let space = SearchSpace::new((0..10).map(|i| json!(i)).collect());
        let mut s = RandomSearch::new(1, Budget::Count(3));
        let mut measured = 0;
        let mut total = 0;
        loop {
            let p = s.propose(&space, 2);
            if p.is_empty() {
                break;
            }
            for i in p {
                total += 1;
                let obs = if i % 2 == 0 {
                    Observation::Pruned {
                        kind: "compile".into(),
                    }
                } else {
                    measured += 1;
                    Observation::Measured {
                        median_us: 1.0,
                        rel_spread: 0.0,
                    }
                };
                s.observe(&space, i, &obs);
            }
        }
        assert_eq!(measured, 3);
        assert!(total > 3, "pruned proposals were replaced");
    }

    #[test]
    fn guided_is_deterministic_and_within_budget() {
        let (space, cost) = synthetic_space();
        let a = drive(
            &mut Guided::new(42, Budget::Fraction(0.15)),
            &space,
            &cost,
            4,
        );
        let b = drive(
            &mut Guided::new(42, Budget::Fraction(0.15)),
            &space,
            &cost,
            4,
        );
        assert_eq!(a, b);
        assert_eq!(a.len(), Budget::Fraction(0.15).limit(space.len()));
        assert_eq!(a[0], 0, "the default config is measured first");
        let mut d = a.clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), a.len(), "no config proposed twice");
    }

    #[test]
    fn guided_descends_a_synthetic_landscape() {
        // Mechanics check on a SYNTHETIC smooth cost, not evidence about real kernels.
        let (space, cost) = synthetic_space();
        let best = cost.iter().cloned().fold(f64::INFINITY, f64::min);
        for seed in 0..10 {
            let seen = drive(
                &mut Guided::new(seed, Budget::Fraction(0.15)),
                &space,
                &cost,
                4,
            );
            let found = seen.iter().map(|&i| cost[i]).fold(f64::INFINITY, f64::min);
            assert!(
                found <= best * 1.03,
                "seed {seed}: found {found}, best {best}"
            );
        }
    }

    /// Drives `g` over `space`, observing `obs(i)` for each proposal; returns the proposals.
    fn drive_obs(
        g: &mut dyn Strategy,
        space: &SearchSpace,
        batch: usize,
        obs: impl Fn(usize) -> Observation,
    ) -> Vec<usize> {
        let mut seen = Vec::new();
        loop {
            let p = g.propose(space, batch);
            if p.is_empty() {
                return seen;
            }
            for i in p {
                seen.push(i);
                g.observe(space, i, &obs(i));
            }
        }
    }

    #[test]
    fn guided_hint_seeds_are_spread_out() {
        // SYNTHETIC hint: the true cost, so the top of the hint is one tight cluster.
        let (space, cost) = synthetic_space();
        let space = space.with_hint(cost.clone()).unwrap();
        let params = GuidedParams::default();
        let mut g = Guided::new(5, Budget::Count(1 + params.hint_seeds));
        let seen = drive(&mut g, &space, &cost, 2);
        assert_eq!(seen[0], 0, "the default first");
        let best = (0..cost.len())
            .min_by(|&a, &b| cost[a].total_cmp(&cost[b]))
            .unwrap();
        assert_eq!(seen[1], best, "then the model's favourite");
        for (x, &a) in seen.iter().enumerate().skip(1) {
            for &b in &seen[x + 1..] {
                assert!(
                    space.distance(a, b) >= params.seed_distance,
                    "seeds {a} and {b} are neighbours"
                );
            }
        }
    }

    #[test]
    fn guided_with_a_hint_is_deterministic_and_corrects_a_biased_model() {
        // SYNTHETIC: the hint is right about the shape but wrong about stages (it prefers 1),
        // the measurements say 4; the nearest-measurement correction moves the search there.
        let (space, cost) = synthetic_space();
        let hint: Vec<f64> = space
            .configs()
            .iter()
            .map(|c| {
                let l = |x: f64, opt: f64| (x.log2() - opt).powi(2);
                let (bm, bn) = (c["bm"].as_f64().unwrap(), c["bn"].as_f64().unwrap());
                10.0 + l(bm, 7.0) + 2.0 * l(bn, 6.0) + (c["stages"].as_f64().unwrap() - 1.0) * 0.05
            })
            .collect();
        let space = space.with_hint(hint).unwrap();
        let best = cost.iter().cloned().fold(f64::INFINITY, f64::min);
        let run = || {
            drive(
                &mut Guided::new(1, Budget::Fraction(0.15)),
                &space,
                &cost,
                4,
            )
        };
        let seen = run();
        assert_eq!(seen, run());
        assert_eq!(seen.len(), Budget::Fraction(0.15).limit(space.len()));
        let found = seen.iter().map(|&i| cost[i]).fold(f64::INFINITY, f64::min);
        assert!(found <= best * 1.03, "found {found}, best {best}");
    }

    #[test]
    fn guided_steps_away_from_run_time_failures() {
        // SYNTHETIC: the hint loves large stage counts, but every config with stages >= 5
        // faults at run time; after the first faults the search avoids their neighbourhood.
        let (space, cost) = synthetic_space();
        let hint: Vec<f64> = space
            .configs()
            .iter()
            .enumerate()
            .map(|(i, c)| cost[i] - c["stages"].as_f64().unwrap())
            .collect();
        let space = space.with_hint(hint).unwrap();
        let faults = |i: usize| space.config(i).unwrap()["stages"].as_u64().unwrap() >= 5;
        let obs = |i: usize| {
            if faults(i) {
                Observation::Failed {
                    kind: "fault".into(),
                }
            } else {
                Observation::Measured {
                    median_us: cost[i],
                    rel_spread: 0.0,
                }
            }
        };
        let seen = drive_obs(&mut Guided::new(2, Budget::Count(20)), &space, 2, obs);
        assert_eq!(seen.len(), 20);
        // The seeds are chosen before any feedback (the model's favourites all fault); the
        // model alone would keep proposing stages 5-6, the search after the seeds mostly not.
        let local = &seen[1 + GuidedParams::default().hint_seeds..];
        let failed = local.iter().filter(|&&i| faults(i)).count();
        assert!(
            failed * 3 < local.len(),
            "{failed} of {} local measurements were faults",
            local.len()
        );
        assert!(
            seen.iter().any(|&i| !faults(i) && i != 0),
            "found working configs beyond the default"
        );
    }

    #[test]
    fn guided_survives_failures_and_uses_hint_seeds() {
        let (space, cost) = synthetic_space();
        let best_idx = (0..cost.len())
            .min_by(|&a, &b| cost[a].total_cmp(&cost[b]))
            .unwrap();
        let hint: Vec<f64> = (0..space.len())
            .map(|i| if i == best_idx { 0.0 } else { 1.0 })
            .collect();
        let space = space.with_hint(hint).unwrap();
        let mut g = Guided::new(3, Budget::Count(10));
        let mut seen = Vec::new();
        loop {
            let p = g.propose(&space, 3);
            if p.is_empty() {
                break;
            }
            for i in p {
                seen.push(i);
                // Everything but the hinted best fails at run time.
                let obs = if i == best_idx {
                    Observation::Measured {
                        median_us: cost[i],
                        rel_spread: 0.0,
                    }
                } else {
                    Observation::Failed {
                        kind: "fault".into(),
                    }
                };
                g.observe(&space, i, &obs);
            }
        }
        assert_eq!(seen.len(), 10);
        assert_eq!(
            &seen[..2],
            &[0, best_idx],
            "default, then the hint's favourite"
        );
    }
}
