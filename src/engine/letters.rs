//! Letter readouts of one or many criteria against a state: every criterion
//! and every debias rotation is one branch after the state's past, and the
//! branches go to the runtime together (packed where it packs).

use super::branches::{self, Plan};
use super::{Engine, EngineError, Readout, StateId};
use crate::core::input::criteria::Criterion;
use crate::core::input::mode::{Calibration, Mode};
use crate::core::read::cloze_math::{calibrate_letters, Baseline};
use crate::core::read::debias::{combine, orders, Debias};
use crate::core::read::decision::Decision;
use crate::core::text::prompt::render_suffix;
use crate::runtime::{PackBudget, ReadSpec, RowRead, Runtime};

impl<R: Runtime> Engine<R> {
    /// How this engine's branch sets run: the runtime's packing budget (cut
    /// to the proven run length where the proof had to find one), else one
    /// run per branch.
    pub(super) fn branch_plan(&self) -> Plan {
        let faulted = !self.proof.run_limit_trials.is_empty();
        let budget = self.runtime.branch_budget().map(|b| PackBudget {
            tokens: if faulted {
                b.tokens.min(self.proof.run_limit)
            } else {
                b.tokens
            },
            ..b
        });
        Plan {
            conv: self.proof.convention,
            limit: self.proof.run_limit,
            budget,
        }
    }

    /// What a packed pass may hold on this engine (`None`: no packing).
    pub fn pack_budget(&self) -> Option<PackBudget> {
        self.branch_plan().budget
    }

    /// The suffix ids of `criterion` in display `order` after the state's
    /// head, refused when head + suffix overflow the context.
    pub(super) fn suffix_for(
        &self,
        id: StateId,
        criterion: &Criterion,
        order: &[usize],
    ) -> Result<Vec<u32>, EngineError> {
        let state = self
            .states
            .get(&id)
            .ok_or(EngineError::UnknownState(id.0))?;
        let suffix = self.suffix_ids(
            &state.head_ids,
            &state.head,
            &render_suffix(criterion, order),
        )?;
        self.check_context("evidence + criterion", state.head_ids.len() + suffix.len())?;
        Ok(suffix)
    }

    /// Letter decisions for `criteria` (already checked for the mode), one
    /// per criterion in order.
    pub(super) async fn score_letters(
        &mut self,
        id: StateId,
        criteria: &[Criterion],
        opts: &Readout,
        uncached: bool,
    ) -> Result<Vec<Decision>, EngineError> {
        let reads = self.read_letters(id, criteria, opts, uncached).await?;
        (0..criteria.len())
            .map(|ci| self.decide_letters(id, criteria, ci, &reads, opts))
            .collect()
    }

    /// The letter decision for one criterion (already checked for the mode).
    pub(super) async fn score_letter(
        &mut self,
        id: StateId,
        criterion: &Criterion,
        opts: &Readout,
        uncached: bool,
    ) -> Result<Decision, EngineError> {
        let criteria = std::slice::from_ref(criterion);
        let reads = self.read_letters(id, criteria, opts, uncached).await?;
        self.decide_letters(id, criteria, 0, &reads, opts)
    }

    /// Runs every (criterion, rotation) of `criteria` as a branch after the
    /// state's past; `uncached` runs each from an empty past instead (the
    /// reference).
    async fn read_letters(
        &mut self,
        id: StateId,
        criteria: &[Criterion],
        opts: &Readout,
        uncached: bool,
    ) -> Result<LetterReads, EngineError> {
        let t0 = self.runtime.now_ms();
        let debias = opts.debias;
        self.ensure_baselines(id, criteria, Mode::Letters, opts.calibration, &|n| {
            orders(debias, n)
        })
        .await?;
        let want_mass = opts.allowed_mass;
        let mut columns = Vec::with_capacity(criteria.len());
        let mut jobs = Vec::new();
        for (ci, c) in criteria.iter().enumerate() {
            columns.push(self.plan.columns_for(&c.id, c.options.len())?);
            for order in orders(debias, c.options.len()) {
                let suffix = self.suffix_for(id, c, &order)?;
                jobs.push(Job { ci, order, suffix });
            }
        }
        let head = self.plan.head.clone();
        let specs: Vec<ReadSpec<'_>> = columns
            .iter()
            .map(|cols| ReadSpec {
                head: &head,
                columns: cols,
                allowed_mass: want_mass,
            })
            .collect();
        let reads: Vec<RowRead> = if uncached {
            let mut out = Vec::with_capacity(jobs.len());
            for j in &jobs {
                out.push(
                    self.run_suffix(id, &criteria[j.ci], &j.order, true, &specs[j.ci])
                        .await?,
                );
            }
            out
        } else {
            let plan = self.branch_plan();
            let state = self
                .states
                .get(&id)
                .ok_or(EngineError::UnknownState(id.0))?;
            let set: Vec<(&[u32], ReadSpec<'_>)> = jobs
                .iter()
                .map(|j| (j.suffix.as_slice(), specs[j.ci]))
                .collect();
            // A criterion's rotations are consecutive jobs.
            let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
            for (i, j) in jobs.iter().enumerate() {
                match groups.last_mut() {
                    Some(g) if jobs[g.start].ci == j.ci => g.end = i + 1,
                    _ => groups.push(i..i + 1),
                }
            }
            branches::read_last_grouped(&mut self.runtime, &plan, &state.kv, &set, &groups).await?
        };
        let elapsed = self.runtime.now_ms() - t0;
        let all_tokens = jobs.iter().map(|j| j.suffix.len()).sum::<usize>().max(1);
        Ok(LetterReads {
            jobs,
            reads,
            elapsed,
            all_tokens,
        })
    }

    /// Criterion `ci`'s decision from its rotations' reads: each calibrated
    /// against its content-free baseline where asked, then combined. Its `ms`
    /// is the call's time shared out by each criterion's tokens, since
    /// several ran together.
    fn decide_letters(
        &self,
        id: StateId,
        criteria: &[Criterion],
        ci: usize,
        r: &LetterReads,
        opts: &Readout,
    ) -> Result<Decision, EngineError> {
        let c = &criteria[ci];
        let mut runs = Vec::new();
        let mut mass = Vec::new();
        let mut tokens = 0;
        for (j, read) in r.jobs.iter().zip(&r.reads).filter(|(j, _)| j.ci == ci) {
            tokens += j.suffix.len();
            mass.extend(read.slots.allowed_mass);
            let probs = match self.baseline(id, Mode::Letters, c, Some(&j.order))? {
                Some(Baseline::Letters(b)) if opts.calibration == Calibration::ContentFree => {
                    calibrate_letters(&read.slots.probs, b)
                }
                _ => read.slots.probs.clone(),
            };
            runs.push((j.order.clone(), probs));
        }
        let (probs, unstable) = combine(c.options.len(), &runs);
        let allowed_mass = (!mass.is_empty()).then(|| mass.iter().sum::<f64>() / mass.len() as f64);
        let order_unstable = (opts.debias == Debias::Cyclic).then_some(unstable);
        let ms = r.elapsed * tokens as f64 / r.all_tokens as f64;
        Ok(Decision::new(
            c,
            &probs,
            allowed_mass,
            order_unstable,
            ms,
            self.ran(id, opts)?,
        ))
    }
}

/// One branch of a letters call: criterion `ci` in display `order`.
struct Job {
    ci: usize,
    order: Vec<usize>,
    suffix: Vec<u32>,
}

/// Every branch of a letters call and what its run read.
struct LetterReads {
    jobs: Vec<Job>,
    reads: Vec<RowRead>,
    elapsed: f64,
    /// Suffix tokens over every branch, for sharing `elapsed` out.
    all_tokens: usize,
}
