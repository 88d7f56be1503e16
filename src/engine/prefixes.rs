//! Shared prefixes (spec §14): a rubric's instruction and worked examples
//! prefilled once; states built on its past; states that grow by a line of
//! evidence. Every one of them keeps the token-boundary rule of chat
//! templates: the ids already computed must be a prefix of the whole
//! rendering's ids, so a state built in pieces is the state prefilled whole.

use serde::Serialize;

use super::*;
use crate::core::input::prefix::PrefixSpec;
use crate::core::text::prompt::render_example;

/// A prefilled prefix on this engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PrefixId(pub u64);

pub(super) struct LivePrefix<K> {
    pub(super) kv: K,
    pub(super) ids: Vec<u32>,
    /// The body before every child's evidence (`render_before`).
    pub(super) before: String,
    pub(super) style: HeadStyle,
    /// Live states built on it: it may not go before they do.
    pub(super) children: usize,
}

impl<R: Runtime> Engine<R> {
    /// Prefills `spec`'s instruction (the default of the mode `req` resolves
    /// to when it has none) and worked examples, rendered in that mode's
    /// format, once.
    pub async fn prefix(
        &mut self,
        spec: &PrefixSpec,
        req: &ReadoutRequest,
    ) -> Result<PrefixId, EngineError> {
        let style = self.readout(req)?.head_style();
        let (before, ids) = self.prefix_text(spec, style)?;
        let (conv, limit) = (self.proof.convention, self.proof.run_limit);
        let kv = chunk::extend(&mut self.runtime, conv, limit, None, &ids).await?;
        Ok(self.add_prefix(kv, ids, before, style))
    }

    pub(super) fn add_prefix(
        &mut self,
        kv: R::Kv,
        ids: Vec<u32>,
        before: String,
        style: HeadStyle,
    ) -> PrefixId {
        let id = PrefixId(self.next_prefix);
        self.next_prefix += 1;
        self.prefixes.insert(
            id,
            LivePrefix {
                kv,
                ids,
                before,
                style,
                children: 0,
            },
        );
        id
    }

    /// The text before every state's evidence and its ids, for `spec` in
    /// `style`; refused when no evidence would fit after it.
    pub(super) fn prefix_text(
        &self,
        spec: &PrefixSpec,
        style: HeadStyle,
    ) -> Result<(String, Vec<u32>), EngineError> {
        let instruction = spec
            .instruction
            .clone()
            .unwrap_or_else(|| default_instruction(style.mode).to_string());
        let mut examples = String::new();
        for ex in &spec.examples {
            let answer = ex.answer_index(style.mode)?;
            examples.push_str(&render_example(
                style.mode,
                &ex.evidence,
                &ex.criterion,
                answer,
            ));
        }
        let before = render_before(Some(&instruction), &examples);
        let ids = self
            .tokenizer
            .encode(&self.head_text(&before, style.prompt)?)?;
        // Room for at least one token of evidence after it.
        self.check_context("prefix", ids.len() + 1)?;
        Ok((before, ids))
    }

    /// A state whose head is `prefix`'s text then `state`'s evidence,
    /// computed from the prefix's past: only the evidence is run.
    pub async fn prefill_on(
        &mut self,
        prefix: PrefixId,
        state: &StateSpec,
    ) -> Result<StateId, EngineError> {
        if let Some(i) = &state.instruction {
            return Err(EngineError::InvalidOption {
                field: "instruction",
                value: i.chars().take(80).collect(),
                reason: "a state built on a prefix carries the prefix's instruction; give it there",
            });
        }
        self.check_evidence(state)?;
        let p = self
            .prefixes
            .get(&prefix)
            .ok_or(EngineError::UnknownPrefix(prefix.0))?;
        let head = HeadText {
            body: head_after(&p.before, &state.evidence),
            before: p.before.clone(),
            evidence: state.evidence.clone(),
            prompt: p.style.prompt,
        };
        let ids = self
            .tokenizer
            .encode(&self.head_text(&head.body, head.prompt)?)?;
        let start = p.ids.len();
        if !ids.starts_with(&p.ids) {
            return Err(EngineError::TokenBoundary {
                what: "prefix",
                at: first_difference(&p.ids, &ids),
            });
        }
        self.check_context("evidence", ids.len())?;
        let (conv, limit) = (self.proof.convention, self.proof.run_limit);
        let kv = chunk::extend(&mut self.runtime, conv, limit, Some(&p.kv), &ids[start..]).await?;
        if let Some(p) = self.prefixes.get_mut(&prefix) {
            p.children += 1;
        }
        let id = StateId(self.next_state);
        self.next_state += 1;
        self.states.insert(
            id,
            LiveState {
                kv,
                head_ids: ids,
                head,
                parent: Some(prefix),
            },
        );
        Ok(id)
    }

    /// Appends `text` to state `id`'s evidence as a new line: only the new
    /// tokens are run, on the state's own past, which is then replaced.
    pub async fn extend(&mut self, id: StateId, text: &str) -> Result<(), EngineError> {
        if text.trim().is_empty() {
            return Err(CoreError::EmptyField {
                criterion: format!("state {}", id.0),
                field: "text",
            }
            .into());
        }
        let s = self
            .states
            .get(&id)
            .ok_or(EngineError::UnknownState(id.0))?;
        if s.head.body.is_empty() {
            return Err(EngineError::InvalidOption {
                field: "state",
                value: id.0.to_string(),
                reason: "a state prefilled from raw ids has no evidence to extend",
            });
        }
        let grown = StateSpec {
            id: format!("state {}", id.0),
            instruction: None,
            evidence: format!("{}\n{text}", s.head.evidence),
            criteria: Vec::new(),
        };
        self.check_evidence(&grown)?;
        let s = &self.states[&id];
        let head = HeadText {
            body: head_after(&s.head.before, &grown.evidence),
            before: s.head.before.clone(),
            evidence: grown.evidence,
            prompt: s.head.prompt,
        };
        let ids = self
            .tokenizer
            .encode(&self.head_text(&head.body, head.prompt)?)?;
        if !ids.starts_with(&s.head_ids) {
            return Err(EngineError::TokenBoundary {
                what: "extend",
                at: first_difference(&s.head_ids, &ids),
            });
        }
        self.check_context("evidence", ids.len())?;
        let start = s.head_ids.len();
        let (conv, limit) = (self.proof.convention, self.proof.run_limit);
        let kv = chunk::extend(&mut self.runtime, conv, limit, Some(&s.kv), &ids[start..]).await?;
        let s = self
            .states
            .get_mut(&id)
            .ok_or(EngineError::UnknownState(id.0))?;
        let old = std::mem::replace(&mut s.kv, kv);
        s.head_ids = ids;
        s.head = head;
        self.runtime.release(old);
        Ok(())
    }

    /// Releases a prefix's KV; refused while states built on it live.
    pub fn dispose_prefix(&mut self, id: PrefixId) -> Result<(), EngineError> {
        let p = self
            .prefixes
            .get(&id)
            .ok_or(EngineError::UnknownPrefix(id.0))?;
        if p.children > 0 {
            return Err(EngineError::PrefixInUse {
                prefix: id.0,
                children: p.children,
            });
        }
        if let Some(p) = self.prefixes.remove(&id) {
            self.runtime.release(p.kv);
        }
        Ok(())
    }

    /// The tokens a prefix holds.
    pub fn prefix_tokens(&self, id: PrefixId) -> Result<usize, EngineError> {
        Ok(self
            .prefixes
            .get(&id)
            .ok_or(EngineError::UnknownPrefix(id.0))?
            .ids
            .len())
    }
}

/// The first index at which `known` is not `whole`'s prefix.
pub(super) fn first_difference(known: &[u32], whole: &[u32]) -> usize {
    known
        .iter()
        .zip(whole)
        .position(|(a, b)| a != b)
        .unwrap_or(known.len().min(whole.len()))
}
