//! The engine: model facts, proven conventions, live states and scoring
//! (spec §6, §7). It knows nothing of JS or of files.

mod branches;
mod chunk;
mod cloze;
pub mod convention;
mod error;
mod kept_prefixes;
pub mod letter_ids;
mod letters;
mod prefix_image;
mod prefixes;
pub mod proof;
mod score;
mod states;

use std::collections::BTreeMap;

use serde::Serialize;

pub use error::EngineError;
pub use prefixes::PrefixId;

use self::cloze::HeadText;
use self::convention::Convention;
use self::letter_ids::LetterPlan;
use self::proof::ProofReport;
use crate::core::input::criteria::MAX_OPTIONS;
use crate::core::input::criteria::{Criterion, StateSpec};
use crate::core::input::mode::{
    Calibration, HeadStyle, Mode, PromptStyle, ReadoutChoice, DEFAULTS_BY_RULE,
};
use crate::core::input::request::{Readout, ReadoutRequest};
use crate::core::model::config::ModelConfig;
use crate::core::model::head_rows::HeadRows;
use crate::core::model::slot_map::SlotMap;
use crate::core::read::cloze_math::{
    cloze_probs, Baseline, BaselineCache, BASELINE_CACHE_CAPACITY,
};
use crate::core::read::decision::Decision;
use crate::core::read::slots::SlotReadout;
use crate::core::text::chat_template::ChatTemplate;
use crate::core::text::prompt::{default_instruction, head_after, render_before, render_suffix};
use crate::core::text::tokenizer::TextTokenizer;
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

/// A prefilled state on this engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct StateId(pub u64);

struct LiveState<K> {
    kv: K,
    head_ids: Vec<u32>,
    head: HeadText,
    /// The shared prefix it was built on, which stays until it is disposed.
    parent: Option<PrefixId>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EngineInfo {
    pub model_id: String,
    pub runtime: String,
    /// Why the loader chose this runtime, where it chose one (natively:
    /// `RuntimeKind::Auto`'s rule, or the runtime asked for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_reason: Option<String>,
    pub config: ModelConfig,
    pub signature: Signature,
    pub letters: LetterPlan,
    pub proof: ProofReport,
    /// What a call that does not choose gets.
    pub readout_defaults: ReadoutChoice,
    /// Where those defaults come from: a models.json entry, or the rule.
    pub readout_defaults_from: String,
    /// Where `prompt: "chat"` comes from, or why it cannot be served.
    pub chat_template: ChatTemplateInfo,
}

/// `info()`'s account of the chat template: its source, or why there is none
/// (the refusal a `prompt: "chat"` call would get).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum ChatTemplateInfo {
    Available { source: String },
    Unavailable { code: &'static str, reason: String },
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
    prefixes: BTreeMap<PrefixId, prefixes::LivePrefix<R::Kv>>,
    next_prefix: u64,
    /// The model's chat template, or why `prompt: "chat"` cannot be served.
    chat: Result<ChatTemplate, CoreError>,
    baselines: BaselineCache,
    baselines_computed: u64,
    defaults: ReadoutChoice,
    defaults_from: String,
    runtime_reason: Option<String>,
    /// The model's files as the loader keys them (their sha256s), which a
    /// kept prefix is stored under; `None` when the loader has no hashes.
    model_key: Option<String>,
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
            prefixes: BTreeMap::new(),
            next_prefix: 1,
            chat,
            baselines: BaselineCache::new(BASELINE_CACHE_CAPACITY),
            baselines_computed: 0,
            defaults: ReadoutChoice::default(),
            defaults_from: DEFAULTS_BY_RULE.to_string(),
            runtime_reason: None,
            model_key: None,
        })
    }

    pub fn info(&self) -> EngineInfo {
        EngineInfo {
            model_id: self.model_id.clone(),
            runtime: self.runtime.describe(),
            runtime_reason: self.runtime_reason.clone(),
            config: self.config.clone(),
            signature: self.runtime.signature().clone(),
            letters: self.plan.clone(),
            proof: self.proof.clone(),
            readout_defaults: self.defaults,
            readout_defaults_from: self.defaults_from.clone(),
            chat_template: match &self.chat {
                Ok(t) => ChatTemplateInfo::Available {
                    source: t.name().to_string(),
                },
                Err(e) => ChatTemplateInfo::Unavailable {
                    code: e.info().code,
                    reason: e.to_string(),
                },
            },
        }
    }

    /// Sets what calls that do not choose get, and where that came from (a
    /// models.json entry); cloze on a graph that cannot serve it is refused
    /// here rather than on every later call.
    pub fn set_readout_defaults(
        &mut self,
        d: ReadoutChoice,
        from: impl Into<String>,
    ) -> Result<(), EngineError> {
        if d.mode == Mode::Cloze {
            self.check_cloze_graph()?;
        }
        if d.prompt == PromptStyle::Chat {
            self.chat()?;
        }
        self.defaults = d;
        self.defaults_from = from.into();
        Ok(())
    }

    /// Records why the loader chose this runtime (`info().runtime_reason`).
    pub fn set_runtime_reason(&mut self, reason: String) {
        self.runtime_reason = Some(reason);
    }

    pub fn readout_defaults(&self) -> ReadoutChoice {
        self.defaults
    }

    /// Where `readout_defaults` come from: a models.json entry, or the rule.
    pub fn readout_defaults_from(&self) -> &str {
        &self.defaults_from
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

    /// `req` resolved against this model's defaults and head: what a call
    /// that asks for `req` runs (`ReadoutRequest::resolve`, the one place).
    pub fn readout(&self, req: &ReadoutRequest) -> Result<Readout, EngineError> {
        Ok(req.resolve(self.defaults, self.is_pruned())?)
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
}
