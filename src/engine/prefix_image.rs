//! A kept prefix's bytes: what `Engine::export_prefix` writes and
//! `Engine::restore_prefix` reads back. Laid out as
//!
//! ```text
//! "RDPREFIX" | u32 header length | header (JSON) | past tensors | u64 checksum
//! ```
//!
//! The header carries the key (format, engine version, model, runtime, the
//! prompt settings, the token ids) and the text before the evidence. The
//! tensors are the runtime's past in signature order (`runtime/kv_image.rs`).
//! Every size is checked against what this engine's graph makes of the
//! header's token count before anything is allocated, and the checksum
//! covers every byte before it, so a truncated or altered file is refused,
//! never used. The checksum guards against damage, not against someone who
//! can write the origin's storage: they could run any code on the page.

use serde::{Deserialize, Serialize};

use super::EngineError;
use crate::core::input::mode::{Mode, PromptStyle};

/// Bumped whenever the layout or the meaning of a past changes.
pub const FORMAT: u32 = 1;
const MAGIC: &[u8; 8] = b"RDPREFIX";
/// A header is its text and ids: 64 MiB is far above any context's.
const MAX_HEADER: usize = 64 << 20;

/// The key and the text of a kept prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format: u32,
    pub engine: String,
    /// The model's files, as the loader keys them (their sha256s).
    pub model: String,
    /// The runtime that computed the past: another one computes other bits.
    pub runtime: String,
    pub dtype: String,
    pub prompt: PromptStyle,
    pub mode: Mode,
    /// The text before every state's evidence.
    pub before: String,
    pub ids: Vec<u32>,
}

/// The most bytes a stored prefix of up to `max_tokens` can take: what a
/// reader may allocate before `decode` checks the exact size.
pub fn bound(max_tokens: usize, bytes_per_token: usize) -> usize {
    MAGIC.len() + 4 + MAX_HEADER + max_tokens * bytes_per_token + 8
}

/// What this engine expects of a stored prefix, before its bytes are read.
pub struct Expect<'a> {
    pub engine: &'a str,
    pub model: &'a str,
    pub runtime: &'a str,
    pub dtype: &'a str,
    /// Bytes of past per token: every tensor's heads × head size × dtype, summed.
    pub bytes_per_token: usize,
    pub tensors: usize,
    pub max_tokens: usize,
}

/// A stored prefix's header and its tensors, borrowed from the bytes.
pub struct Decoded<'a> {
    pub header: Header,
    pub tensors: Vec<&'a [u8]>,
}

fn stale(field: &'static str, reason: String) -> EngineError {
    EngineError::StalePrefix {
        field,
        reason,
        limit: None,
    }
}

pub fn encode(header: &Header, tensors: &[Vec<u8>]) -> Result<Vec<u8>, EngineError> {
    let json = serde_json::to_vec(header).map_err(|e| stale("header", e.to_string()))?;
    let body: usize = tensors.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + json.len() + body + 8);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    for t in tensors {
        out.extend_from_slice(t);
    }
    let sum = checksum(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    Ok(out)
}

/// Reads `bytes` as a prefix this engine can use, or refuses by the first
/// field that differs.
pub fn decode<'a>(bytes: &'a [u8], want: &Expect<'_>) -> Result<Decoded<'a>, EngineError> {
    let fixed = MAGIC.len() + 4;
    if bytes.len() < fixed + 8 || &bytes[..MAGIC.len()] != MAGIC {
        return Err(stale(
            "format",
            "not a kept prefix (no RDPREFIX mark at its start)".into(),
        ));
    }
    let mut len4 = [0u8; 4];
    len4.copy_from_slice(&bytes[MAGIC.len()..fixed]);
    let header_len = u32::from_le_bytes(len4) as usize;
    if header_len > MAX_HEADER || header_len > bytes.len() - fixed - 8 {
        return Err(EngineError::StalePrefix {
            field: "bytes",
            reason: format!(
                "its header claims {header_len} bytes of the {} there are (truncated?)",
                bytes.len()
            ),
            limit: Some(bytes.len().saturating_sub(fixed + 8).min(MAX_HEADER)),
        });
    }
    let header: Header = serde_json::from_slice(&bytes[fixed..fixed + header_len])
        .map_err(|e| stale("header", format!("unreadable ({e})")))?;
    let same = |field: &'static str, got: &str, want: &str| {
        if got == want {
            Ok(())
        } else {
            Err(stale(
                field,
                format!("stored for {field} {got:?}; this engine is {want:?}"),
            ))
        }
    };
    if header.format != FORMAT {
        return Err(stale(
            "format",
            format!(
                "stored in format {}; this engine reads {FORMAT}",
                header.format
            ),
        ));
    }
    same("engine", &header.engine, want.engine)?;
    same("model", &header.model, want.model)?;
    same("runtime", &header.runtime, want.runtime)?;
    same("dtype", &header.dtype, want.dtype)?;
    let tokens = header.ids.len();
    if tokens == 0 || tokens > want.max_tokens {
        return Err(EngineError::StalePrefix {
            field: "ids",
            reason: format!(
                "{tokens} tokens; a prefix holds 1 to {} on this model",
                want.max_tokens
            ),
            limit: Some(want.max_tokens),
        });
    }
    // The exact size, from this engine's graph and the token count, before
    // any tensor is allocated.
    let body = tokens * want.bytes_per_token;
    let total = fixed + header_len + body + 8;
    if bytes.len() != total {
        return Err(EngineError::StalePrefix {
            field: "bytes",
            reason: format!(
                "{} bytes where {tokens} tokens of this model take {total} (truncated or padded)",
                bytes.len()
            ),
            limit: Some(total),
        });
    }
    let mut sum8 = [0u8; 8];
    sum8.copy_from_slice(&bytes[total - 8..]);
    if checksum(&bytes[..total - 8]) != u64::from_le_bytes(sum8) {
        return Err(stale(
            "checksum",
            "its bytes do not sum to the checksum stored with them (altered)".into(),
        ));
    }
    let per = body / want.tensors.max(1);
    let start = fixed + header_len;
    let tensors = (0..want.tensors)
        .map(|i| &bytes[start + i * per..start + (i + 1) * per])
        .collect();
    Ok(Decoded { header, tensors })
}

/// A 64-bit checksum in four independent lanes (fast in wasm32, where a
/// stored past is tens of MB): each lane is a chain of bijections of its
/// words, so one changed word always changes its lane, and the lanes are
/// folded so that one changed lane always changes the sum.
pub fn checksum(b: &[u8]) -> u64 {
    const K: [u64; 4] = [
        0x9E37_79B9_7F4A_7C15,
        0xC2B2_AE3D_27D4_EB4F,
        0x1656_67B1_9E37_79F9,
        0xD6E8_FEB8_6659_FD93,
    ];
    let mut h = [K[3], K[2], K[1], K[0]];
    let mix = |h: &mut [u64; 4], c: &[u8; 32]| {
        for (i, lane) in h.iter_mut().enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(&c[i * 8..i * 8 + 8]);
            *lane = (*lane ^ u64::from_le_bytes(w))
                .wrapping_mul(K[i])
                .rotate_left(29);
        }
    };
    let (chunks, rest) = b.as_chunks::<32>();
    for c in chunks {
        mix(&mut h, c);
    }
    let mut tail = [0u8; 32];
    tail[..rest.len()].copy_from_slice(rest);
    mix(&mut h, &tail);
    (b.len() as u64) ^ h[0] ^ h[1].rotate_left(16) ^ h[2].rotate_left(32) ^ h[3].rotate_left(48)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(ids: Vec<u32>) -> Header {
        Header {
            format: FORMAT,
            engine: "e".into(),
            model: "m".into(),
            runtime: "r".into(),
            dtype: "float32".into(),
            prompt: PromptStyle::Plain,
            mode: Mode::Letters,
            before: "Rubric".into(),
            ids,
        }
    }

    fn want(bytes_per_token: usize) -> Expect<'static> {
        Expect {
            engine: "e",
            model: "m",
            runtime: "r",
            dtype: "float32",
            bytes_per_token,
            tensors: 2,
            max_tokens: 8,
        }
    }

    fn stored() -> Vec<u8> {
        encode(&header(vec![1, 2, 3]), &[vec![7; 12], vec![9; 12]]).unwrap()
    }

    fn field(r: Result<Decoded<'_>, EngineError>) -> String {
        match r {
            Err(e) => e.info().field.unwrap_or_default(),
            Ok(_) => "accepted".into(),
        }
    }

    #[test]
    fn a_stored_prefix_reads_back_as_written() {
        let b = stored();
        let d = decode(&b, &want(8)).unwrap();
        assert_eq!(d.header, header(vec![1, 2, 3]));
        assert_eq!(d.tensors, vec![&[7u8; 12][..], &[9u8; 12][..]]);
    }

    #[test]
    fn every_changed_byte_and_every_truncation_is_refused() {
        let b = stored();
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x10;
            assert_ne!(field(decode(&c, &want(8))), "accepted", "byte {i} flipped");
            assert_ne!(field(decode(&b[..i], &want(8))), "accepted", "cut at {i}");
        }
    }

    #[test]
    fn a_prefix_for_another_key_is_refused_by_the_field_that_differs() {
        let b = stored();
        let mut w = want(8);
        w.model = "other";
        assert_eq!(field(decode(&b, &w)), "model");
        let mut w = want(8);
        w.engine = "0.2.0";
        assert_eq!(field(decode(&b, &w)), "engine");
        let mut w = want(8);
        w.runtime = "onnxruntime";
        assert_eq!(field(decode(&b, &w)), "runtime");
        // Another graph's past size: the bytes cannot be its tokens' KV.
        assert_eq!(field(decode(&b, &want(16))), "bytes");
        let mut w = want(8);
        w.max_tokens = 2;
        assert_eq!(field(decode(&b, &w)), "ids");
    }

    #[test]
    fn a_header_that_claims_more_than_there_is_is_refused_before_reading_it() {
        let mut b = stored();
        b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(field(decode(&b, &want(8))), "bytes");
    }
}
