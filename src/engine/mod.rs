//! The engine: model facts, proven conventions, live states and scoring
//! (spec §6, §7). It knows nothing of JS or of files.

mod branches;
mod chunk;
mod cloze;
pub mod convention;
mod error;
pub mod head;
mod letters;
pub mod proof;

use std::collections::BTreeMap;

use serde::Serialize;

pub use error::EngineError;

use self::cloze::HeadText;
use self::convention::Convention;
use self::head::LetterPlan;
use self::proof::ProofReport;
use crate::core::chat::ChatTemplate;
use crate::core::cloze::{cloze_probs, Baseline, BaselineCache, BASELINE_CACHE_CAPACITY};
use crate::core::config::ModelConfig;
use crate::core::debias::Debias;
use crate::core::decision::Decision;
use crate::core::fixture::MAX_OPTIONS;
use crate::core::fixture::{Criterion, StateSpec};
use crate::core::head_rows::HeadRows;
use crate::core::mode::{Calibration, ClozeScore, HeadStyle, Mode, PromptStyle, ReadoutChoice};
use crate::core::prompt::{default_instruction, render_head, render_suffix};
use crate::core::readout::SlotReadout;
use crate::core::slot_map::SlotMap;
use crate::core::tokenizer::TextTokenizer;
use crate::core::CoreError;
use crate::runtime::{ReadSpec, RowRead, Runtime, Signature};

/// What a model is besides its graph: read by a platform loader, parsed here.
pub struct ModelAssets {
    pub model_id: String,
    pub config_json: String,
    pub tokenizer_json: Vec<u8>,
    pub slot_map_json: Option<String>,
    /// `head_rows.json`, required when the graph exposes `last_hidden`.
    pub head_rows_json: Option<String>,
    /// `chat_template.jinja`, when the model ships one.
    pub chat_template: Option<String>,
    /// `tokenizer_config.json` (its `chat_template` and special tokens).
    pub tokenizer_config_json: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct ScoreOptions {
    pub debias: Debias,
    /// Compute the letters' share of the full softmax (unpruned heads only).
    pub allowed_mass: bool,
    pub mode: Mode,
    /// How a cloze option's tokens add up (cloze only).
    pub cloze_score: ClozeScore,
    pub calibration: Calibration,
}

impl Default for ScoreOptions {
    fn default() -> Self {
        Self {
            debias: Debias::None,
            allowed_mass: true,
            mode: Mode::Letters,
            cloze_score: ClozeScore::Sum,
            calibration: Calibration::None,
        }
    }
}

/// A prefilled state on this engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct StateId(pub u64);

struct LiveState<K> {
    kv: K,
    head_ids: Vec<u32>,
    head: HeadText,
}

#[derive(Debug, Clone, Serialize)]
pub struct EngineInfo {
    pub model_id: String,
    pub runtime: String,
    pub config: ModelConfig,
    pub signature: Signature,
    pub letters: LetterPlan,
    pub proof: ProofReport,
    /// What a call that does not choose gets.
    pub readout_defaults: ReadoutChoice,
    /// Where `prompt: "chat"` comes from, or why it cannot be served.
    pub chat_template: Result<String, String>,
}

pub struct Engine<R: Runtime> {
    runtime: R,
    model_id: String,
    config: ModelConfig,
    tokenizer: TextTokenizer,
    plan: LetterPlan,
    proof: ProofReport,
    states: BTreeMap<StateId, LiveState<R::Kv>>,
    next_state: u64,
    /// The model's chat template, or why `prompt: "chat"` cannot be served.
    chat: Result<ChatTemplate, CoreError>,
    baselines: BaselineCache,
    baselines_computed: u64,
    defaults: ReadoutChoice,
}

impl<R: Runtime> Engine<R> {
    /// Parses the assets, proves the conventions (spec §6) and freezes them.
    pub async fn new(mut runtime: R, assets: ModelAssets) -> Result<Self, EngineError> {
        let config = ModelConfig::parse(&assets.config_json)?;
        let tokenizer = TextTokenizer::from_json(&assets.tokenizer_json)?;
        let slot_map = assets
            .slot_map_json
            .as_deref()
            .map(SlotMap::parse)
            .transpose()?;
        let plan = LetterPlan::new(&tokenizer, &config, slot_map.as_ref())?;
        let sig = runtime.signature();
        if sig.past.len() != config.layers {
            return Err(EngineError::Proof(format!(
                "graph has {} past_key_values pairs but config.json num_hidden_layers is {}",
                sig.past.len(),
                config.layers
            )));
        }
        let head_rows = assets
            .head_rows_json
            .as_deref()
            .map(HeadRows::parse)
            .transpose()?;
        if sig.exposes_hidden() && head_rows.is_none() {
            return Err(EngineError::Proof("the graph exposes last_hidden but head_rows.json is missing: extraction cannot be proven".into()));
        }
        let head_rows = head_rows.filter(|_| sig.exposes_hidden());
        let proof = proof::prove(&mut runtime, &tokenizer, &plan, head_rows.as_ref()).await?;
        // A broken or absent template refuses `prompt: "chat"` when asked, not the load.
        let chat = ChatTemplate::from_model_files(
            assets.chat_template.as_deref(),
            assets.tokenizer_config_json.as_deref(),
        )
        .and_then(|t| {
            t.ok_or_else(|| CoreError::NoChatTemplate {
                model: assets.model_id.clone(),
            })
        });
        Ok(Self {
            runtime,
            model_id: assets.model_id,
            config,
            tokenizer,
            plan,
            proof,
            states: BTreeMap::new(),
            next_state: 1,
            chat,
            baselines: BaselineCache::new(BASELINE_CACHE_CAPACITY),
            baselines_computed: 0,
            defaults: ReadoutChoice::default(),
        })
    }

    pub fn info(&self) -> EngineInfo {
        EngineInfo {
            model_id: self.model_id.clone(),
            runtime: self.runtime.describe(),
            config: self.config.clone(),
            signature: self.runtime.signature().clone(),
            letters: self.plan.clone(),
            proof: self.proof.clone(),
            readout_defaults: self.defaults,
            chat_template: self
                .chat
                .as_ref()
                .map(|t| t.name().to_string())
                .map_err(|e| e.to_string()),
        }
    }

    /// Sets what calls that do not choose get; cloze on a graph that cannot
    /// serve it is refused here rather than on every later call.
    pub fn set_readout_defaults(&mut self, d: ReadoutChoice) -> Result<(), EngineError> {
        if d.mode == Mode::Cloze {
            self.check_cloze_graph()?;
        }
        if d.prompt == PromptStyle::Chat {
            self.chat()?;
        }
        self.defaults = d;
        Ok(())
    }

    pub fn readout_defaults(&self) -> ReadoutChoice {
        self.defaults
    }

    pub fn convention(&self) -> Convention {
        self.proof.convention
    }

    pub fn proof(&self) -> &ProofReport {
        &self.proof
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn tokenizer(&self) -> &TextTokenizer {
        &self.tokenizer
    }

    pub fn is_pruned(&self) -> bool {
        self.plan.pruned_letters.is_some()
    }

    /// Live KV tensors over every state.
    pub fn live_kv_tensors(&self) -> usize {
        self.states
            .values()
            .map(|s| self.runtime.kv_tensors(&s.kv))
            .sum()
    }

    /// Bytes the runtime has copied out of its tensors since load.
    pub fn bytes_read_back(&self) -> u64 {
        self.runtime.bytes_read_back()
    }

    pub fn live_states(&self) -> usize {
        self.states.len()
    }

    fn check_context(&self, field: &'static str, tokens: usize) -> Result<(), EngineError> {
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

    /// Runs the head once, in the plain prompt for letters, and keeps its KV.
    pub async fn prefill(&mut self, state: &StateSpec) -> Result<StateId, EngineError> {
        self.prefill_with(state, HeadStyle::default()).await
    }

    /// Runs the head once in `style` and keeps its KV; every criterion
    /// scored against the state is rendered the same way. A state without an
    /// instruction gets the default of `style.mode`; it can still be scored
    /// in the other mode.
    pub async fn prefill_with(
        &mut self,
        state: &StateSpec,
        style: HeadStyle,
    ) -> Result<StateId, EngineError> {
        // The instruction alone would still tokenise to something: check the
        // evidence itself, or an empty state is scored as if it said nothing.
        if state.evidence.trim().is_empty() {
            return Err(CoreError::EmptyEvidence {
                state: state.id.clone(),
            }
            .into());
        }
        let prompt = style.prompt;
        let instruction = state
            .instruction
            .clone()
            .unwrap_or_else(|| default_instruction(style.mode).to_string());
        let head = HeadText {
            body: render_head(Some(&instruction), &state.evidence),
            instruction,
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
        self.states.insert(id, LiveState { kv, head_ids, head });
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
            instruction: String::new(),
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
        self.runtime.release(s.kv);
        Ok(())
    }

    /// Releases every state's KV (the engine stays usable).
    pub fn dispose_all(&mut self) {
        for (_, s) in std::mem::take(&mut self.states) {
            self.runtime.release(s.kv);
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

    /// Scores one criterion against a prefilled state.
    pub async fn score(
        &mut self,
        id: StateId,
        criterion: &Criterion,
        opts: &ScoreOptions,
    ) -> Result<Decision, EngineError> {
        self.score_with(id, criterion, opts, false).await
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
        opts: &ScoreOptions,
    ) -> Result<Decision, EngineError> {
        self.score_with(id, criterion, opts, true).await
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
        opts: &ScoreOptions,
    ) -> Result<Vec<Decision>, EngineError> {
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
            out.push(self.score(id, c, opts).await?);
        }
        Ok(out)
    }

    /// One suffix readout of `criterion` in display `order` against the
    /// state's past (or, `uncached`, head + suffix ids from an empty past:
    /// never a re-tokenisation), in runs no longer than the proven limit.
    async fn run_suffix(
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
    fn ran(&self, id: StateId, opts: &ScoreOptions) -> Result<ReadoutChoice, EngineError> {
        let state = self
            .states
            .get(&id)
            .ok_or(EngineError::UnknownState(id.0))?;
        Ok(ReadoutChoice {
            mode: opts.mode,
            cloze_score: opts.cloze_score,
            calibration: opts.calibration,
            prompt: state.head.prompt,
        })
    }

    /// The criterion's shape under the mode asked for, and options that only
    /// one mode takes.
    fn check_options(criterion: &Criterion, opts: &ScoreOptions) -> Result<(), EngineError> {
        criterion.validate_for(opts.mode)?;
        if opts.mode == Mode::Cloze && opts.debias != Debias::None {
            return Err(EngineError::InvalidOption {
                field: "debias",
                value: "cyclic".into(),
                reason: "rotations move options between letters; cloze shows no letters (use debias none)",
            });
        }
        Ok(())
    }

    async fn score_with(
        &mut self,
        id: StateId,
        criterion: &Criterion,
        opts: &ScoreOptions,
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
