//! Prefixes kept across visits: a prefix's past written out with its key
//! (`prefix_image.rs`), and read back into a prefix that decides bit for bit
//! as the one prefilled, or refused by the field that differs. Where the
//! bytes are kept is the caller's (the browser's storage, a file).

use sha2::{Digest, Sha256};

use super::prefix_image::{self, Expect, Header, FORMAT};
use super::prefixes::first_difference;
use super::*;
use crate::core::input::prefix::PrefixSpec;
use crate::runtime::KvView;

/// What a kept prefix records of the engine that made it.
const ENGINE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// This engine's side of a kept prefix's key.
struct Ours {
    model: String,
    runtime: String,
    dtype: &'static str,
    bytes_per_token: usize,
    tensors: usize,
}

impl<R: Runtime> Engine<R> {
    /// The model's files as the loader keys them (their sha256s): what a
    /// kept prefix is stored under. Without it, prefixes are not kept.
    pub fn set_model_key(&mut self, key: String) {
        self.model_key = Some(key);
    }

    fn ours(&self) -> Result<Ours, EngineError> {
        let model = self.model_key.clone().ok_or(EngineError::PrefixUnkeyed)?;
        let sig = self.runtime.signature();
        let (heads, dim) = sig.kv_head_dims()?;
        let dtype = self.runtime.kv_dtype();
        let tensors = sig.past.len() * 2;
        Ok(Ours {
            model,
            runtime: self.runtime.kv_origin(),
            dtype: dtype.name(),
            bytes_per_token: heads * dim * dtype.bytes() * tensors,
            tensors,
        })
    }

    /// The key a prefix of `spec` asked for with `req` is kept under on this engine
    /// (hex sha256 of the model, engine, runtime, prompt settings and token
    /// ids): the same on every visit that would compute the same past.
    pub fn prefix_key(
        &self,
        spec: &PrefixSpec,
        req: &ReadoutRequest,
    ) -> Result<String, EngineError> {
        let style = self.readout(req)?.head_style();
        let ours = self.ours()?;
        let (_, ids) = self.prefix_text(spec, style)?;
        let mut h = Sha256::new();
        for part in [
            &FORMAT.to_string(),
            ENGINE_VERSION,
            &ours.model,
            &ours.runtime,
            ours.dtype,
            prompt_name(style.prompt),
            mode_name(style.mode),
        ] {
            h.update(part.as_bytes());
            h.update([0]);
        }
        for id in ids {
            h.update(id.to_le_bytes());
        }
        Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The most bytes a kept prefix for this engine can take, to check a
    /// stored one's size against before reading it.
    pub fn prefix_bytes_bound(&self) -> Result<usize, EngineError> {
        let ours = self.ours()?;
        Ok(prefix_image::bound(
            self.config.max_positions,
            ours.bytes_per_token,
        ))
    }

    /// Prefix `id`'s past and key as bytes, to restore in a later visit.
    pub async fn export_prefix(&mut self, id: PrefixId) -> Result<Vec<u8>, EngineError> {
        let ours = self.ours()?;
        let p = self
            .prefixes
            .get(&id)
            .ok_or(EngineError::UnknownPrefix(id.0))?;
        let header = Header {
            format: FORMAT,
            engine: ENGINE_VERSION.to_string(),
            model: ours.model,
            runtime: ours.runtime,
            dtype: ours.dtype.to_string(),
            prompt: p.style.prompt,
            mode: p.style.mode,
            before: p.before.clone(),
            ids: p.ids.clone(),
        };
        let image = self.runtime.export_kv(&p.kv).await?;
        prefix_image::encode(&header, &image.tensors)
    }

    /// A prefix from bytes `export_prefix` wrote, on this engine or one
    /// loaded later from the same model files. With `expect`, the prefix
    /// the caller would prefill: its prompt settings and ids must be the
    /// stored ones. Refused (`stale_prefix`, naming the field) otherwise,
    /// and when the bytes were made elsewhere or damaged; nothing is
    /// allocated before the sizes are checked.
    pub async fn restore_prefix(
        &mut self,
        bytes: &[u8],
        expect: Option<(&PrefixSpec, &ReadoutRequest)>,
    ) -> Result<PrefixId, EngineError> {
        let ours = self.ours()?;
        let want = Expect {
            engine: ENGINE_VERSION,
            model: &ours.model,
            runtime: &ours.runtime,
            dtype: ours.dtype,
            bytes_per_token: ours.bytes_per_token,
            tensors: ours.tensors,
            // Room for at least one token of evidence after it.
            max_tokens: self.config.max_positions.saturating_sub(1),
        };
        let d = prefix_image::decode(bytes, &want)?;
        let h = &d.header;
        let stale = |field: &'static str, reason: String| EngineError::StalePrefix {
            field,
            reason,
            limit: None,
        };
        if let Some((spec, req)) = expect {
            let style = self.readout(req)?.head_style();
            if style.prompt != h.prompt {
                return Err(stale(
                    "prompt",
                    format!(
                        "stored for prompt {}, asked for {}",
                        prompt_name(h.prompt),
                        prompt_name(style.prompt)
                    ),
                ));
            }
            if style.mode != h.mode {
                return Err(stale(
                    "mode",
                    format!(
                        "stored for mode {}, asked for {}",
                        mode_name(h.mode),
                        mode_name(style.mode)
                    ),
                ));
            }
            let (before, ids) = self.prefix_text(spec, style)?;
            if ids != h.ids || before != h.before {
                return Err(stale(
                    "ids",
                    format!(
                        "the stored prefix's {} tokens are not this prefix's {} (its text differs from token {})",
                        h.ids.len(),
                        ids.len(),
                        first_difference(&h.ids, &ids)
                    ),
                ));
            }
        }
        // The stored text must still give the stored ids on this tokenizer
        // and template: states built on it extend those ids.
        let ids = self
            .tokenizer
            .encode(&self.head_text(&h.before, h.prompt)?)?;
        if ids != h.ids {
            return Err(stale(
                "ids",
                format!(
                    "the stored text gives other ids here (from token {})",
                    first_difference(&h.ids, &ids)
                ),
            ));
        }
        let view = KvView {
            dtype: self.runtime.kv_dtype(),
            len: h.ids.len(),
            tensors: d.tensors,
        };
        let kv = self.runtime.import_kv(&view).await?;
        let style = HeadStyle {
            prompt: h.prompt,
            mode: h.mode,
        };
        Ok(self.add_prefix(kv, d.header.ids, d.header.before, style))
    }
}

fn prompt_name(p: PromptStyle) -> &'static str {
    match p {
        PromptStyle::Plain => "plain",
        PromptStyle::Chat => "chat",
    }
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Letters => "letters",
        Mode::Cloze => "cloze",
    }
}
