//! A state's life: prefill (the head run once, its KV kept), the raw-id
//! entry points the benchmarks use, and disposal.

use super::*;

impl<R: Runtime> Engine<R> {
    pub(super) fn check_context(
        &self,
        field: &'static str,
        tokens: usize,
    ) -> Result<(), EngineError> {
        let limit = self.config.max_positions;
        if tokens > limit {
            return Err(CoreError::ContextOverflow {
                field,
                tokens,
                limit,
            }
            .into());
        }
        Ok(())
    }

    /// Refuses evidence that is empty, or surely longer than the context
    /// (counted from its first pieces, before it is tokenised in full).
    pub(super) fn check_evidence(&self, state: &StateSpec) -> Result<(), EngineError> {
        // The instruction alone would still tokenise to something: check the
        // evidence itself, or an empty state is scored as if it said nothing.
        if state.evidence.trim().is_empty() {
            return Err(CoreError::EmptyEvidence {
                state: state.id.clone(),
            }
            .into());
        }
        let limit = self.config.max_positions;
        if let Some((counted_bytes, tokens)) =
            self.tokenizer.surely_exceeds(&state.evidence, limit)?
        {
            return Err(CoreError::ContextOverflowEarly {
                field: "evidence",
                bytes: state.evidence.len(),
                counted_bytes,
                tokens,
                limit,
            }
            .into());
        }
        Ok(())
    }

    /// Runs the head once in the model's default prompt and mode, and keeps its KV.
    pub async fn prefill(&mut self, state: &StateSpec) -> Result<StateId, EngineError> {
        self.prefill_with(state, &ReadoutRequest::default()).await
    }

    /// Runs the head once in the prompt `req` resolves to and keeps its KV;
    /// every criterion scored against the state is rendered the same way. A
    /// state without an instruction gets the default of the resolved mode;
    /// it can still be scored in the other mode.
    pub async fn prefill_with(
        &mut self,
        state: &StateSpec,
        req: &ReadoutRequest,
    ) -> Result<StateId, EngineError> {
        let style = self.readout(req)?.head_style();
        self.check_evidence(state)?;
        let prompt = style.prompt;
        let instruction = state
            .instruction
            .clone()
            .unwrap_or_else(|| default_instruction(style.mode).to_string());
        let before = render_before(Some(&instruction), "");
        let head = HeadText {
            body: head_after(&before, &state.evidence),
            before,
            evidence: state.evidence.clone(),
            prompt,
        };
        let head_ids = self
            .tokenizer
            .encode(&self.head_text(&head.body, prompt)?)?;
        if head_ids.is_empty() {
            return Err(CoreError::EmptyField {
                criterion: state.id.clone(),
                field: "evidence",
            }
            .into());
        }
        self.keep_head("evidence", head_ids, head).await
    }

    /// Runs `head_ids` from an empty past in proven-length chunks and keeps the KV as a new state.
    async fn keep_head(
        &mut self,
        field: &'static str,
        head_ids: Vec<u32>,
        head: HeadText,
    ) -> Result<StateId, EngineError> {
        self.check_context(field, head_ids.len())?;
        let kv = chunk::extend(
            &mut self.runtime,
            self.proof.convention,
            self.proof.run_limit,
            None,
            &head_ids,
        )
        .await?;
        let id = StateId(self.next_state);
        self.next_state += 1;
        self.states.insert(
            id,
            LiveState {
                kv,
                head_ids,
                head,
                parent: None,
            },
        );
        Ok(id)
    }

    /// Prefills raw token ids (no prompt rendering): the benchmark's fixed
    /// prefix, so every runner feeds identical ids.
    pub async fn prefill_ids(&mut self, ids: &[u32]) -> Result<StateId, EngineError> {
        if ids.is_empty() {
            return Err(CoreError::EmptyField {
                criterion: "prefill".into(),
                field: "ids",
            }
            .into());
        }
        // Raw ids have no text: read through `read_ids`, not scored.
        let head = HeadText {
            before: String::new(),
            evidence: String::new(),
            body: String::new(),
            prompt: PromptStyle::Plain,
        };
        self.keep_head("ids", ids.to_vec(), head).await
    }

    /// The readout of the first `options` letters after the state's past and
    /// raw `ids`: exactly the run a criterion of that many suffix tokens costs
    /// (same chunking, same readout path), without the prompt around it.
    pub async fn read_ids(
        &mut self,
        id: StateId,
        ids: &[u32],
        options: usize,
        allowed_mass: bool,
    ) -> Result<SlotReadout, EngineError> {
        if options < 2 {
            return Err(CoreError::TooFewOptions {
                criterion: "sweep".into(),
                count: options,
            }
            .into());
        }
        if options > MAX_OPTIONS {
            return Err(CoreError::TooManyOptions {
                criterion: "sweep".into(),
                count: options,
                limit: MAX_OPTIONS,
                mode: "letters",
            }
            .into());
        }
        if ids.is_empty() {
            return Err(CoreError::EmptyField {
                criterion: "sweep".into(),
                field: "ids",
            }
            .into());
        }
        let columns = self.plan.columns_for("sweep", options)?;
        let state = self
            .states
            .get(&id)
            .ok_or(EngineError::UnknownState(id.0))?;
        self.check_context("ids", state.head_ids.len() + ids.len())?;
        let head = self.plan.head.clone();
        let spec = ReadSpec {
            head: &head,
            columns: &columns,
            allowed_mass: allowed_mass && !self.is_pruned(),
        };
        let (conv, limit) = (self.proof.convention, self.proof.run_limit);
        let (read, _) =
            chunk::read(&mut self.runtime, conv, limit, Some(&state.kv), ids, &spec).await?;
        Ok(read.slots)
    }

    /// Releases a state's KV. Disposing twice is an error that names the state.
    pub fn dispose(&mut self, id: StateId) -> Result<(), EngineError> {
        let s = self
            .states
            .remove(&id)
            .ok_or(EngineError::UnknownState(id.0))?;
        if let Some(p) = s.parent.and_then(|p| self.prefixes.get_mut(&p)) {
            p.children -= 1;
        }
        self.runtime.release(s.kv);
        Ok(())
    }

    /// Releases every state's KV, then every prefix's (the engine stays usable).
    pub fn dispose_all(&mut self) {
        for (_, s) in std::mem::take(&mut self.states) {
            self.runtime.release(s.kv);
        }
        for (_, p) in std::mem::take(&mut self.prefixes) {
            self.runtime.release(p.kv);
        }
    }

    pub fn runtime(&self) -> &R {
        &self.runtime
    }

    pub fn head_tokens(&self, id: StateId) -> Result<usize, EngineError> {
        Ok(self
            .states
            .get(&id)
            .ok_or(EngineError::UnknownState(id.0))?
            .head_ids
            .len())
    }
}
