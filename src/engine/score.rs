//! Scoring criteria against a kept state: one criterion or all of a
//! state's, the uncached reference, and the diagnostics that run suffixes
//! as a batch or read the exposed hidden state.

use super::*;

impl<R: Runtime> Engine<R> {
    /// Scores one criterion against a prefilled state, with `req` over the
    /// model's defaults.
    pub async fn score(
        &mut self,
        id: StateId,
        criterion: &Criterion,
        req: &ReadoutRequest,
    ) -> Result<Decision, EngineError> {
        let opts = self.readout(req)?;
        self.score_with(id, criterion, &opts, false).await
    }

    /// Drops every cached content-free baseline (the next calibrated score recomputes).
    pub fn clear_baselines(&mut self) {
        self.baselines.clear();
    }

    /// The reference: every suffix scored by one uncached forward of the
    /// concatenated head and suffix ids (never a re-tokenisation).
    pub async fn score_uncached(
        &mut self,
        id: StateId,
        criterion: &Criterion,
        req: &ReadoutRequest,
    ) -> Result<Decision, EngineError> {
        let opts = self.readout(req)?;
        self.score_with(id, criterion, &opts, true).await
    }

    /// Runs the suffixes of `criteria` against the state's past through the
    /// runtime's `run_many` (a backend that batches runs them as one batch).
    /// onnxruntime-web's GroupQueryAttention refuses batch > 1 with several
    /// new tokens and a past; this is how that refusal is observed, and the
    /// engine stays usable after it.
    pub async fn run_many_suffixes(
        &mut self,
        id: StateId,
        criteria: &[Criterion],
    ) -> Result<Vec<Vec<usize>>, EngineError> {
        let state = self
            .states
            .get(&id)
            .ok_or(EngineError::UnknownState(id.0))?;
        let past_len = self.runtime.kv_len(&state.kv);
        let mut steps = Vec::with_capacity(criteria.len());
        for c in criteria {
            c.validate()?;
            let order: Vec<usize> = (0..c.options.len()).collect();
            let ids = self.tokenizer.encode(&render_suffix(c, &order))?;
            steps.push(convention::derive(
                self.proof.convention,
                self.runtime.signature(),
                past_len,
                &ids,
            ));
        }
        let out = self.runtime.run_many(&steps, Some(&state.kv)).await?;
        Ok(out.into_iter().map(|l| l.dims).collect())
    }

    /// The hidden state at each criterion's answer position (the input to the
    /// head), for graphs that expose it; proven at load (spec §6.4).
    pub async fn extract(
        &mut self,
        id: StateId,
        criteria: &[Criterion],
    ) -> Result<Vec<Vec<f32>>, EngineError> {
        if !self.runtime.signature().exposes_hidden() {
            return Err(EngineError::NoHiddenOutput);
        }
        let mut out = Vec::with_capacity(criteria.len());
        for c in criteria {
            c.validate()?;
            let order: Vec<usize> = (0..c.options.len()).collect();
            let columns = self.plan.all_columns();
            let head = self.plan.head.clone();
            let spec = ReadSpec {
                head: &head,
                columns: &columns,
                allowed_mass: false,
            };
            let r = self.run_suffix(id, c, &order, false, &spec).await?;
            let h = r.hidden.ok_or(EngineError::MissingOutput {
                output: "last_hidden",
            })?;
            out.push(h.to_f32_vec());
        }
        Ok(out)
    }

    pub async fn score_all(
        &mut self,
        id: StateId,
        criteria: &[Criterion],
        req: &ReadoutRequest,
    ) -> Result<Vec<Decision>, EngineError> {
        let opts = &self.readout(req)?;
        crate::core::input::input_limits::check_criteria(criteria.len())?;
        // Decisions are reported by criterion id: two with one id could not be told apart.
        let mut seen = std::collections::HashSet::new();
        for c in criteria {
            if !seen.insert(c.id.as_str()) {
                return Err(CoreError::DuplicateCriterionId {
                    state: format!("#{}", id.0),
                    id: c.id.clone(),
                }
                .into());
            }
        }
        // One content-free prefill serves every criterion's missing baseline.
        for c in criteria {
            Self::check_options(c, opts)?;
        }
        if opts.mode == Mode::Letters {
            // Every criterion and rotation in one set of branches.
            return self.score_letters(id, criteria, opts, false).await;
        }
        self.ensure_baselines(id, criteria, opts.mode, opts.calibration, &|_| Vec::new())
            .await?;
        let mut out = Vec::with_capacity(criteria.len());
        for c in criteria {
            out.push(self.score_with(id, c, opts, false).await?);
        }
        Ok(out)
    }

    /// One suffix readout of `criterion` in display `order` against the
    /// state's past (or, `uncached`, head + suffix ids from an empty past:
    /// never a re-tokenisation), in runs no longer than the proven limit.
    pub(super) async fn run_suffix(
        &mut self,
        id: StateId,
        criterion: &Criterion,
        order: &[usize],
        uncached: bool,
        spec: &ReadSpec<'_>,
    ) -> Result<RowRead, EngineError> {
        let suffix = self.suffix_for(id, criterion, order)?;
        let state = self
            .states
            .get(&id)
            .ok_or(EngineError::UnknownState(id.0))?;
        let (conv, limit) = (self.proof.convention, self.proof.run_limit);
        let (read, _) = if uncached {
            let mut full = state.head_ids.clone();
            full.extend_from_slice(&suffix);
            chunk::read(&mut self.runtime, conv, limit, None, &full, spec).await?
        } else {
            chunk::read(
                &mut self.runtime,
                conv,
                limit,
                Some(&state.kv),
                &suffix,
                spec,
            )
            .await?
        };
        Ok(read)
    }

    /// What a decision reports it ran: the options and the state's prompt.
    pub(super) fn ran(&self, id: StateId, opts: &Readout) -> Result<ReadoutChoice, EngineError> {
        let state = self
            .states
            .get(&id)
            .ok_or(EngineError::UnknownState(id.0))?;
        Ok(opts.choice(state.head.prompt))
    }

    /// The criterion's shape under the mode asked for (the options' own
    /// combinations were checked when the request was resolved).
    pub(super) fn check_options(criterion: &Criterion, opts: &Readout) -> Result<(), EngineError> {
        Ok(criterion.validate_for(opts.mode)?)
    }

    pub(super) async fn score_with(
        &mut self,
        id: StateId,
        criterion: &Criterion,
        opts: &Readout,
        uncached: bool,
    ) -> Result<Decision, EngineError> {
        Self::check_options(criterion, opts)?;
        let t0 = self.runtime.now_ms();
        if opts.mode == Mode::Cloze {
            let lps = self.cloze_log_probs(id, criterion, uncached).await?;
            self.ensure_baselines(
                id,
                std::slice::from_ref(criterion),
                Mode::Cloze,
                opts.calibration,
                &|_| Vec::new(),
            )
            .await?;
            let base = match self.baseline(id, Mode::Cloze, criterion, None)? {
                Some(Baseline::Cloze(b)) if opts.calibration == Calibration::ContentFree => {
                    Some(b.as_slice())
                }
                _ => None,
            };
            let probs = cloze_probs(&lps, base, opts.cloze_score);
            let ms = self.runtime.now_ms() - t0;
            let readout = self.ran(id, opts)?;
            return Ok(Decision::new(criterion, &probs, None, None, ms, readout));
        }
        self.score_letter(id, criterion, opts, uncached).await
    }
}
