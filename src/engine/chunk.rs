//! Runs no longer than the device's proven run length (spec §6.2):
//! a long step becomes batch-1 chunks on a growing past, and every
//! intermediate past is released as soon as the next one exists.

use super::convention::{derive, Convention};
use super::EngineError;
use crate::core::CoreError;
use crate::runtime::{ReadSpec, RowRead, Runtime};

/// Releases `kv` when there is one; used on every exit path.
fn release<R: Runtime>(rt: &mut R, kv: Option<R::Kv>) {
    if let Some(kv) = kv {
        rt.release(kv);
    }
}

/// Grows `past` (or an empty past) by `ids`, `limit` tokens per run. The
/// caller's `past` is never released; the returned past is new.
pub async fn extend<R: Runtime>(
    rt: &mut R,
    conv: Convention,
    limit: usize,
    past: Option<&R::Kv>,
    ids: &[u32],
) -> Result<R::Kv, EngineError> {
    let limit = limit.max(1);
    let mut len = past.map_or(0, |p| rt.kv_len(p));
    let mut owned: Option<R::Kv> = None;
    for chunk in ids.chunks(limit) {
        let step = derive(conv, rt.signature(), len, chunk);
        let grown = rt.extend(&step, owned.as_ref().or(past)).await;
        match grown {
            Ok(kv) => {
                let old = owned.replace(kv);
                release(rt, old);
            }
            Err(e) => {
                release(rt, owned);
                return Err(e.into());
            }
        }
        len += chunk.len();
    }
    owned.ok_or(EngineError::EmptyRun { what: "a step" })
}

/// Reads `spec` after `past` + `ids`. The readout run is the last
/// `min(limit, len)` tokens, so a proof at `limit` always reads a run of
/// exactly `limit` tokens; the tokens before it grow a temporary past.
/// Returns the read and the number of tokens the readout run fed.
pub async fn read<R: Runtime>(
    rt: &mut R,
    conv: Convention,
    limit: usize,
    past: Option<&R::Kv>,
    ids: &[u32],
    spec: &ReadSpec<'_>,
) -> Result<(RowRead, usize), EngineError> {
    if ids.is_empty() {
        return Err(EngineError::EmptyRun { what: "a readout" });
    }
    let limit = limit.max(1);
    let last = limit.min(ids.len());
    let (lead, tail) = ids.split_at(ids.len() - last);
    let grown = if lead.is_empty() {
        None
    } else {
        Some(extend(rt, conv, limit, past, lead).await?)
    };
    let base = grown.as_ref().or(past);
    let len = base.map_or(0, |p| rt.kv_len(p));
    let step = derive(conv, rt.signature(), len, tail);
    let r = rt.read(&step, base, spec).await;
    release(rt, grown);
    Ok((r?, last))
}

/// log p(`targets[i]`) at each of the last `targets.len()` rows of `past` +
/// `ids` (the row that predicts it), in runs of at most `limit` tokens. Runs
/// before the first target row only grow the past; a run with target rows
/// returns its logits at every row, so the graph must be stock.
pub async fn token_log_probs<R: Runtime>(
    rt: &mut R,
    conv: Convention,
    limit: usize,
    past: Option<&R::Kv>,
    ids: &[u32],
    targets: &[u32],
) -> Result<Vec<f64>, EngineError> {
    if ids.is_empty() || targets.len() > ids.len() {
        return Err(EngineError::TargetsOverTokens {
            targets: targets.len(),
            tokens: ids.len(),
        });
    }
    let mut owned: Option<R::Kv> = None;
    let r = token_log_probs_in(rt, conv, limit, past, ids, targets, &mut owned).await;
    release(rt, owned);
    r
}

/// The body of `token_log_probs`; the caller releases `owned` on every path.
async fn token_log_probs_in<R: Runtime>(
    rt: &mut R,
    conv: Convention,
    limit: usize,
    past: Option<&R::Kv>,
    ids: &[u32],
    targets: &[u32],
    owned: &mut Option<R::Kv>,
) -> Result<Vec<f64>, EngineError> {
    let limit = limit.max(1);
    let first = ids.len() - targets.len();
    let mut len = past.map_or(0, |p| rt.kv_len(p));
    let mut out = Vec::with_capacity(targets.len());
    let mut start = 0;
    let runs = ids.len().div_ceil(limit);
    for (i, chunk) in ids.chunks(limit).enumerate() {
        let last = i + 1 == runs;
        let end = start + chunk.len();
        let step = derive(conv, rt.signature(), len, chunk);
        let base = owned.as_ref().or(past);
        let grown = if end <= first {
            Some(rt.extend(&step, base).await?)
        } else {
            let at: Vec<(usize, u32)> = (first.max(start)..end)
                .map(|row| (row - start, targets[row - first]))
                .collect();
            let o = rt.log_probs_at(&step, base, !last, &at).await?;
            let rows = o.dims.get(1).copied().unwrap_or(0);
            if rows != chunk.len() {
                if let Some(p) = o.present {
                    rt.release(p);
                }
                return Err(CoreError::LogitsLayout {
                    dims: o.dims.clone(),
                    expected: format!(
                        "a logit row for each of the {} tokens fed (a stock graph)",
                        chunk.len()
                    ),
                }
                .into());
            }
            out.extend(o.log_probs);
            o.present
        };
        if !last {
            let kv = grown.ok_or(EngineError::MissingOutput {
                output: "present.*",
            })?;
            let old = owned.replace(kv);
            release(rt, old);
        } else if let Some(kv) = grown {
            release(rt, Some(kv));
        }
        start = end;
        len += chunk.len();
    }
    Ok(out)
}
