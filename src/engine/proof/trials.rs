//! Running the probe: one trial per run length (the whole probe first,
//! then the ladder of shorter runs when it fails), and the report or the
//! refusal that names what every trial measured.

use super::*;

/// The outcome of the probe at one run length.
struct Trial {
    uncached_dims: Vec<usize>,
    all_positions: bool,
    candidates: Vec<CandidateResult>,
    extraction: Option<f64>,
}

impl Trial {
    fn agreeing(&self) -> Vec<Convention> {
        self.candidates
            .iter()
            .filter(|r| r.agrees)
            .map(|r| r.convention)
            .collect()
    }
}

struct Probe<'a> {
    plan: &'a LetterPlan,
    head_rows: Option<&'a HeadRows>,
    head: Vec<u32>,
    suffix: Vec<u32>,
    tol: f64,
}

/// The probe with runs of at most `limit` tokens: the suffix after the
/// cached head under each candidate, its readout run exactly `limit` tokens
/// long, against a reference forward of head + suffix from an empty past in
/// runs of at most `reference_limit`. With whole runs both are single
/// forwards (spec §6.2). When chunked, the reference uses runs of half the
/// length, so the two paths never end in the same run and a fault at
/// `limit` cannot hide by showing up identically in both.
async fn trial<R: Runtime>(
    rt: &mut R,
    p: &Probe<'_>,
    limit: usize,
    reference_limit: usize,
) -> Result<Trial, EngineError> {
    let sig = rt.signature().clone();
    let columns = p.plan.all_columns();
    let spec = ReadSpec {
        head: &p.plan.head,
        columns: &columns,
        allowed_mass: false,
    };
    let mut full = p.head.clone();
    full.extend_from_slice(&p.suffix);
    let first = candidates(&sig)[0];
    let (uncached, fed) = chunk::read(rt, first, reference_limit, None, &full, &spec).await?;
    let all_positions = check_dims(&uncached.dims, fed, "uncached forward")?;
    finite(&uncached)?;
    varies(&uncached)?;
    let reference = &uncached.slots.probs;

    let kv = chunk::extend(rt, first, limit, None, &p.head).await?;
    let past_len = rt.kv_len(&kv);
    if past_len != p.head.len() {
        rt.release(kv);
        return Err(EngineError::Proof(format!(
            "prefill of {} tokens returned a past of {past_len}",
            p.head.len()
        )));
    }
    let mut results = Vec::new();
    let mut hidden_checks = Vec::new();
    for conv in candidates(&sig) {
        let r = match chunk::read(rt, conv, limit, Some(&kv), &p.suffix, &spec).await {
            Err(e) => CandidateResult {
                convention: conv,
                max_dp: None,
                argmax_same: None,
                error: Some(e.to_string()),
                agrees: false,
            },
            Ok((out, fed)) => {
                match check_dims(&out.dims, fed, "cached suffix").and_then(|_| finite(&out)) {
                    Err(e) => CandidateResult {
                        convention: conv,
                        max_dp: None,
                        argmax_same: None,
                        error: Some(e.to_string()),
                        agrees: false,
                    },
                    Ok(()) => {
                        let c = compare(conv, &out.slots.probs, reference, p.tol);
                        if p.head_rows.is_some() && c.agrees {
                            hidden_checks.push(out);
                        }
                        c
                    }
                }
            }
        };
        results.push(r);
    }
    rt.release(kv);

    let mut trial = Trial {
        uncached_dims: uncached.dims.clone(),
        all_positions,
        candidates: results,
        extraction: None,
    };
    if let (Some(rows), [_]) = (p.head_rows, trial.agreeing().as_slice()) {
        let mut worst = extraction_miss(
            rows,
            uncached.hidden.as_ref(),
            &columns,
            &uncached.slots.logits,
            "uncached forward",
        )?;
        for out in &hidden_checks {
            worst = worst.max(extraction_miss(
                rows,
                out.hidden.as_ref(),
                &columns,
                &out.slots.logits,
                "cached suffix",
            )?);
        }
        trial.extraction = Some(worst);
    }
    Ok(trial)
}

fn summary(tokens: usize, t: &Result<Trial, EngineError>) -> LimitTrial {
    match t {
        Ok(t) => LimitTrial {
            tokens,
            agreeing: t.agreeing().len(),
            detail: describe(&t.candidates),
        },
        Err(e) => LimitTrial {
            tokens,
            agreeing: 0,
            detail: e.to_string(),
        },
    }
}

/// Runs the probe under every candidate and freezes the one convention that
/// matches the uncached forward. When none matches with whole runs, the
/// probe is repeated with shorter runs to find the longest run length this
/// device computes exactly (a device may fault on long runs); that length is
/// frozen with the convention. Anything else is a hard error.
pub async fn prove<R: Runtime>(
    rt: &mut R,
    tok: &TextTokenizer,
    plan: &LetterPlan,
    head_rows: Option<&HeadRows>,
) -> Result<ProofReport, EngineError> {
    let (head, suffix) = probe_ids(tok)?;
    let tol = tolerance(rt.signature().logits_dtype);
    let probe = Probe {
        plan,
        head_rows,
        head,
        suffix,
        tol,
    };
    let whole = probe.head.len() + probe.suffix.len();

    let first = match trial(rt, &probe, whole, whole).await {
        // Shorter runs of a graph that computes nothing compute nothing:
        // on a CPU-emulated GPU the ladder below took over ten minutes.
        Err(e @ EngineError::ProofDegenerate(_)) => return Err(e),
        t => t,
    };
    let mut trials = Vec::new();
    let (limit, chosen) = match &first {
        Ok(t) if t.agreeing().len() == 1 => (whole, first),
        Ok(t) if t.agreeing().len() > 1 => return Err(refusal(t, tol, &[])),
        _ => {
            trials.push(summary(whole, &first));
            let mut found: Option<(usize, Trial)> = None;
            let mut failed_at = whole;
            for &l in LIMIT_LADDER.iter().filter(|&&l| l < whole) {
                let t = trial(rt, &probe, l, l.div_ceil(2)).await;
                trials.push(summary(l, &t));
                match t {
                    Ok(t) if t.agreeing().len() == 1 => {
                        found = Some((l, t));
                        break;
                    }
                    _ => failed_at = l,
                }
            }
            let Some((mut lo, mut best)) = found else {
                return Err(match first {
                    Ok(t) => refusal(&t, tol, &trials),
                    Err(e) => e,
                });
            };
            // Bisect between the longest passing and the shortest failing length.
            let mut hi = failed_at;
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                let t = trial(rt, &probe, mid, mid.div_ceil(2)).await;
                trials.push(summary(mid, &t));
                match t {
                    Ok(t) if t.agreeing().len() == 1 => {
                        lo = mid;
                        best = t;
                    }
                    _ => hi = mid,
                }
            }
            (lo, Ok(best))
        }
    };
    let t = chosen?;
    let convention = t.agreeing()[0];
    Ok(ProofReport {
        probe_head_tokens: probe.head.len(),
        probe_suffix_tokens: probe.suffix.len(),
        uncached_dims: t.uncached_dims,
        all_positions: t.all_positions,
        logits_dtype: rt.signature().logits_dtype,
        tolerance: tol,
        candidates: t.candidates,
        convention,
        extraction_max_abs_diff: t.extraction,
        run_limit: limit,
        run_limit_trials: trials,
    })
}

fn refusal(t: &Trial, tol: f64, trials: &[LimitTrial]) -> EngineError {
    let mut msg = format!(
        "{} of {} position conventions agree with the uncached forward (tolerance {tol:e}); exactly one must. Measured: {}",
        t.agreeing().len(),
        t.candidates.len(),
        describe(&t.candidates)
    );
    if trials.len() > 1 {
        let tried: Vec<String> = trials[1..]
            .iter()
            .map(|l| format!("{} tokens per run: {} agree", l.tokens, l.agreeing))
            .collect();
        msg.push_str(&format!(
            ". Shorter runs did not help: {}",
            tried.join("; ")
        ));
    }
    EngineError::Proof(msg)
}
