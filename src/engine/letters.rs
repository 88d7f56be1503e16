//! Letter readouts of one or many criteria against a state: every criterion
//! and every debias rotation is one branch after the state's past, and the
//! branches go to the runtime together (packed where it packs).

use super::branches::{self, Plan};
use super::{Engine, EngineError, ScoreOptions, StateId};
use crate::core::cloze::{calibrate_letters, Baseline};
use crate::core::debias::{combine, orders, Debias};
use crate::core::decision::Decision;
use crate::core::fixture::Criterion;
use crate::core::mode::{Calibration, Mode};
use crate::core::prompt::render_suffix;
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

    /// Letter decisions for `criteria` (already checked for the mode). Each
    /// (criterion, rotation) is a branch; `uncached` runs each from an empty
    /// past instead (the reference). A decision's `ms` is the call's time
    /// shared out by each criterion's tokens when several ran together.
    pub(super) async fn score_letters(
        &mut self,
        id: StateId,
        criteria: &[Criterion],
        opts: &ScoreOptions,
        uncached: bool,
    ) -> Result<Vec<Decision>, EngineError> {
        let t0 = self.runtime.now_ms();
        let debias = opts.debias;
        self.ensure_baselines(id, criteria, Mode::Letters, opts.calibration, &|n| {
            orders(debias, n)
        })
        .await?;
        let want_mass = opts.allowed_mass && !self.is_pruned();
        let mut columns = Vec::with_capacity(criteria.len());
        // (criterion, order, suffix ids)
        let mut jobs = Vec::new();
        for (ci, c) in criteria.iter().enumerate() {
            columns.push(self.plan.columns_for(&c.id, c.options.len())?);
            for order in orders(debias, c.options.len()) {
                let suffix = self.suffix_for(id, c, &order)?;
                jobs.push((ci, order, suffix));
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
            for (ci, order, _) in &jobs {
                out.push(
                    self.run_suffix(id, &criteria[*ci], order, true, &specs[*ci])
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
                .map(|(ci, _, s)| (s.as_slice(), specs[*ci]))
                .collect();
            branches::read_last(&mut self.runtime, &plan, &state.kv, &set).await?
        };
        let elapsed = self.runtime.now_ms() - t0;
        let all_tokens: usize = jobs.iter().map(|j| j.2.len()).sum::<usize>().max(1);
        let readout = self.ran(id, opts)?;
        let mut out = Vec::with_capacity(criteria.len());
        for (ci, c) in criteria.iter().enumerate() {
            let mut runs = Vec::new();
            let mut mass = Vec::new();
            let mut tokens = 0;
            for ((_, order, suffix), r) in jobs.iter().zip(&reads).filter(|(j, _)| j.0 == ci) {
                tokens += suffix.len();
                mass.extend(r.slots.allowed_mass);
                let probs = match self.baseline(id, Mode::Letters, c, Some(order))? {
                    Some(Baseline::Letters(b)) if opts.calibration == Calibration::ContentFree => {
                        calibrate_letters(&r.slots.probs, b)
                    }
                    _ => r.slots.probs.clone(),
                };
                runs.push((order.clone(), probs));
            }
            let (probs, unstable) = combine(c.options.len(), &runs);
            let allowed_mass =
                (!mass.is_empty()).then(|| mass.iter().sum::<f64>() / mass.len() as f64);
            let order_unstable = (debias == Debias::Cyclic).then_some(unstable);
            let ms = elapsed * tokens as f64 / all_tokens as f64;
            out.push(Decision::new(
                c,
                &probs,
                allowed_mass,
                order_unstable,
                ms,
                readout,
            ));
        }
        Ok(out)
    }
}
