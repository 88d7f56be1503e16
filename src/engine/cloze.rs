//! Cloze scoring, the content-free baseline both modes can divide out, and
//! the prompt style a state was prefilled in (plain text or the model's chat
//! template).

use super::branches::{self, Plan};
use super::{chunk, Engine, EngineError, StateId};
use crate::core::input::criteria::Criterion;
use crate::core::input::mode::{Calibration, Mode, PromptStyle};
use crate::core::read::cloze_math::Baseline;
use crate::core::text::chat_template::ChatTemplate;
use crate::core::text::prompt::{
    head_after, render_option, render_question, render_suffix, CONTENT_FREE_EVIDENCE,
};
use crate::core::CoreError;
use crate::runtime::{ReadSpec, Runtime};

/// What a state's head was rendered from, so its suffixes (and its
/// content-free twin) are rendered the same way.
#[derive(Debug, Clone)]
pub(super) struct HeadText {
    /// The body before the evidence (`render_before`): the instruction (the
    /// state's own, or the default of the mode it was prefilled for) and
    /// any worked examples of the prefix it was built on. Its content-free
    /// twin puts `N/A` after the same text.
    pub before: String,
    /// The evidence, as the body holds it (what `extend` appends to).
    pub evidence: String,
    /// The plain contract's head text (`render_head`).
    pub body: String,
    pub prompt: PromptStyle,
}

/// A baseline's cache key: everything it depends on, nothing of the evidence.
fn baseline_key(head: &HeadText, mode: Mode, c: &Criterion, order: Option<&[usize]>) -> String {
    let mut k = format!(
        "{}\u{0}{}\u{0}{}\u{0}{}",
        head.prompt.name(),
        head.before,
        mode.name(),
        c.question
    );
    for o in &c.options {
        k.push('\u{0}');
        k.push_str(&o.description);
    }
    if let Some(order) = order {
        k.push_str(&format!("\u{0}{order:?}"));
    }
    k
}

/// Per option, log p of each of its tokens after `past` + `question`. With
/// `head_ids` (uncached) every run starts from an empty past instead:
/// head + question + option in one forward.
async fn option_log_probs<R: Runtime>(
    rt: &mut R,
    plan: &Plan,
    past: &R::Kv,
    uncached_head: Option<&[u32]>,
    question: &[u32],
    options: &[Vec<u32>],
) -> Result<Vec<Vec<f64>>, EngineError> {
    let Some((&q_last, q_lead)) = question.split_last() else {
        return Err(EngineError::EmptyRun {
            what: "a cloze question",
        });
    };
    let (conv, limit) = (plan.conv, plan.limit);
    if let Some(head) = uncached_head {
        let mut out = Vec::with_capacity(options.len());
        for o in options {
            let mut ids = head.to_vec();
            ids.extend_from_slice(question);
            ids.extend_from_slice(&o[..o.len() - 1]);
            out.push(chunk::token_log_probs(rt, conv, limit, None, &ids, o).await?);
        }
        return Ok(out);
    }
    // The question runs once as a child past; each option is then a branch
    // after it that feeds the question's last token (whose row predicts the
    // option's first) and all but its own last token.
    let child = if q_lead.is_empty() {
        None
    } else {
        Some(chunk::extend(rt, conv, limit, Some(past), q_lead).await?)
    };
    let base = child.as_ref().unwrap_or(past);
    let ids: Vec<Vec<u32>> = options
        .iter()
        .map(|o| {
            let mut ids = vec![q_last];
            ids.extend_from_slice(&o[..o.len() - 1]);
            ids
        })
        .collect();
    let set: Vec<(&[u32], &[u32])> = ids
        .iter()
        .zip(options)
        .map(|(i, o)| (i.as_slice(), o.as_slice()))
        .collect();
    let result = branches::log_probs(rt, plan, base, &set).await;
    if let Some(kv) = child {
        rt.release(kv);
    }
    result
}

impl<R: Runtime> Engine<R> {
    pub(super) fn chat(&self) -> Result<&ChatTemplate, EngineError> {
        self.chat.as_ref().map_err(|e| EngineError::Core(e.clone()))
    }

    /// The text a head of `body` is prefilled as, in `prompt`.
    pub(super) fn head_text(&self, body: &str, prompt: PromptStyle) -> Result<String, EngineError> {
        match prompt {
            PromptStyle::Plain => Ok(body.to_string()),
            PromptStyle::Chat => Ok(self.chat()?.head_text(body)?),
        }
    }

    /// The ids that follow `head_ids` for a suffix of `text`. Plain: the
    /// suffix tokenised alone (the contract concatenates ids). Chat: the
    /// whole prompt rendered and tokenised, and the head's ids must be its
    /// prefix, or the split is refused naming the template.
    pub(super) fn suffix_ids(
        &self,
        head_ids: &[u32],
        head: &HeadText,
        text: &str,
    ) -> Result<Vec<u32>, EngineError> {
        match head.prompt {
            PromptStyle::Plain => Ok(self.tokenizer.encode(text)?),
            PromptStyle::Chat => {
                let chat = self.chat()?;
                // "\n\n" would be one token across the cut: the suffix's own
                // leading newline is dropped inside the user message.
                let full =
                    chat.render_user(&format!("{}{}", head.body, text.trim_start_matches('\n')))?;
                let ids = self.tokenizer.encode(&full)?;
                if !ids.starts_with(head_ids) {
                    let at = ids
                        .iter()
                        .zip(head_ids)
                        .position(|(a, b)| a != b)
                        .unwrap_or(ids.len().min(head_ids.len()));
                    return Err(CoreError::TemplateSplit {
                        template: chat.name().to_string(),
                        reason: format!(
                            "the head's {} tokens are not a prefix of the full prompt's {} tokens (they differ at token {at})",
                            head_ids.len(),
                            ids.len()
                        ),
                    }
                    .into());
                }
                Ok(ids[head_ids.len()..].to_vec())
            }
        }
    }

    /// Cloze reads a row per option token: only a stock graph returns them.
    pub(super) fn check_cloze_graph(&self) -> Result<(), EngineError> {
        let graph = if self.is_pruned() {
            "pruned"
        } else if !self.proof.all_positions {
            "trimmed"
        } else {
            return Ok(());
        };
        Err(EngineError::ModeNeedsStockGraph {
            mode: Mode::Cloze.name(),
            model: self.model_id.clone(),
            graph,
        })
    }

    /// The question part's ids and each option's ids after a head.
    fn cloze_ids(
        &self,
        head_ids: &[u32],
        head: &HeadText,
        c: &Criterion,
    ) -> Result<(Vec<u32>, Vec<Vec<u32>>), EngineError> {
        let question = self.suffix_ids(head_ids, head, &render_question(c))?;
        let mut options = Vec::with_capacity(c.options.len());
        for o in &c.options {
            let text = match head.prompt {
                PromptStyle::Plain => render_option(&o.description),
                // After the assistant's turn opens on a new line, no leading space.
                PromptStyle::Chat => o.description.trim().to_string(),
            };
            let ids = self.tokenizer.encode(&text)?;
            if ids.is_empty() {
                return Err(CoreError::EmptyField {
                    criterion: c.id.clone(),
                    field: "options[].description",
                }
                .into());
            }
            options.push(ids);
        }
        let longest = options.iter().map(Vec::len).max().unwrap_or(0);
        self.check_context(
            "evidence + question + option",
            head_ids.len() + question.len() + longest,
        )?;
        Ok((question, options))
    }

    /// Per option of `criterion`, the log-probability of each of its tokens
    /// as the continuation of the state's question part; `uncached` runs
    /// head + question + option as one forward from an empty past (the
    /// reference the cached child past is proven against).
    pub async fn cloze_log_probs(
        &mut self,
        id: StateId,
        criterion: &Criterion,
        uncached: bool,
    ) -> Result<Vec<Vec<f64>>, EngineError> {
        criterion.validate_for(Mode::Cloze)?;
        self.check_cloze_graph()?;
        let state = self
            .states
            .get(&id)
            .ok_or(EngineError::UnknownState(id.0))?;
        let (question, options) = self.cloze_ids(&state.head_ids, &state.head, criterion)?;
        let plan = self.branch_plan();
        let state = self
            .states
            .get(&id)
            .ok_or(EngineError::UnknownState(id.0))?;
        let head = uncached.then_some(state.head_ids.as_slice());
        option_log_probs(
            &mut self.runtime,
            &plan,
            &state.kv,
            head,
            &question,
            &options,
        )
        .await
    }

    /// Content-free baselines computed since load (one per criterion for
    /// cloze, one per criterion and display order for letters).
    pub fn baselines_computed(&self) -> u64 {
        self.baselines_computed
    }

    /// The cached baseline of `criterion` (and `order`, letters) for `id`'s head.
    pub(super) fn baseline(
        &self,
        id: StateId,
        mode: Mode,
        c: &Criterion,
        order: Option<&[usize]>,
    ) -> Result<Option<&Baseline>, EngineError> {
        let state = self
            .states
            .get(&id)
            .ok_or(EngineError::UnknownState(id.0))?;
        Ok(self
            .baselines
            .get(&baseline_key(&state.head, mode, c, order)))
    }

    /// Computes the baselines `criteria` lack under `mode` (and `orders`, for
    /// letters) for `id`'s instruction and prompt: one content-free prefill,
    /// then the same suffix runs a score makes, released before returning.
    pub(super) async fn ensure_baselines(
        &mut self,
        id: StateId,
        criteria: &[Criterion],
        mode: Mode,
        calibration: Calibration,
        orders: &dyn Fn(usize) -> Vec<Vec<usize>>,
    ) -> Result<(), EngineError> {
        if calibration == Calibration::None {
            return Ok(());
        }
        let head = self
            .states
            .get(&id)
            .ok_or(EngineError::UnknownState(id.0))?
            .head
            .clone();
        let mut missing = Vec::new();
        for (i, c) in criteria.iter().enumerate() {
            match mode {
                Mode::Cloze => {
                    let key = baseline_key(&head, mode, c, None);
                    if self.baselines.get(&key).is_none() {
                        missing.push((key, i, None));
                    }
                }
                Mode::Letters => {
                    for order in orders(c.options.len()) {
                        let key = baseline_key(&head, mode, c, Some(&order));
                        if self.baselines.get(&key).is_none() {
                            missing.push((key, i, Some(order)));
                        }
                    }
                }
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let cf = HeadText {
            before: head.before.clone(),
            evidence: CONTENT_FREE_EVIDENCE.to_string(),
            body: head_after(&head.before, CONTENT_FREE_EVIDENCE),
            prompt: head.prompt,
        };
        let cf_ids = self
            .tokenizer
            .encode(&self.head_text(&cf.body, cf.prompt)?)?;
        self.check_context("content-free evidence", cf_ids.len())?;
        let plan = self.branch_plan();
        let kv = chunk::extend(&mut self.runtime, plan.conv, plan.limit, None, &cf_ids).await?;
        let result = self
            .fill_baselines(&plan, &kv, &cf_ids, &cf, criteria, missing)
            .await;
        self.runtime.release(kv);
        result
    }

    /// The `missing` baselines after the content-free past `kv`: cloze ones
    /// per criterion (its options as branches), letter ones as one set of
    /// branches.
    async fn fill_baselines(
        &mut self,
        plan: &Plan,
        kv: &R::Kv,
        cf_ids: &[u32],
        cf: &HeadText,
        criteria: &[Criterion],
        missing: Vec<(String, usize, Option<Vec<usize>>)>,
    ) -> Result<(), EngineError> {
        let mut letters = Vec::new();
        for (key, i, order) in missing {
            let c = &criteria[i];
            match order {
                None => {
                    let (q, o) = self.cloze_ids(cf_ids, cf, c)?;
                    let v = option_log_probs(&mut self.runtime, plan, kv, None, &q, &o).await?;
                    self.baselines.insert(key, Baseline::Cloze(v));
                    self.baselines_computed += 1;
                }
                Some(order) => {
                    let columns = self.plan.columns_for(&c.id, c.options.len())?;
                    let suffix = self.suffix_ids(cf_ids, cf, &render_suffix(c, &order))?;
                    letters.push((key, columns, suffix));
                }
            }
        }
        if letters.is_empty() {
            return Ok(());
        }
        let head = self.plan.head.clone();
        let set: Vec<(&[u32], ReadSpec<'_>)> = letters
            .iter()
            .map(|(_, columns, suffix)| {
                (
                    suffix.as_slice(),
                    ReadSpec {
                        head: &head,
                        columns,
                        allowed_mass: false,
                    },
                )
            })
            .collect();
        let reads = branches::read_last(&mut self.runtime, plan, kv, &set).await?;
        for ((key, _, _), r) in letters.into_iter().zip(reads) {
            self.baselines.insert(key, Baseline::Letters(r.slots.probs));
            self.baselines_computed += 1;
        }
        Ok(())
    }
}
