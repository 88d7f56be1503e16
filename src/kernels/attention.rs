//! `GroupQueryAttention` (com.microsoft) as the builder emits it: rotary
//! inside (non-interleaved, from the graph's own cos/sin caches), a causal
//! mask over past + new tokens, grouped key/value heads, float32 throughout.

use super::par::Pool;
use super::tensor::Value;
use super::OpError;

pub struct Gqa {
    pub heads: usize,
    pub kv_heads: usize,
    /// 0: 1/√head_dim.
    pub scale: f32,
    /// `(cos, sin)`, each `[max_pos, half]`; `None`: keys and queries come
    /// rotated already.
    pub rotary: Option<(Vec<f32>, Vec<f32>, usize)>,
    /// `local_window_size` (sliding-window layers): a row at position `pos`
    /// sees the `w` keys at positions `pos + 1 - w ..= pos`, as Gemma's
    /// sliding window is defined and as ONNX Runtime 1.30 computes it
    /// (measured: keeping `w + 1` moves a tiny Gemma 3's probabilities by
    /// 1.4e-4, keeping `w` by 3e-10); `None`: every earlier key.
    pub window: Option<usize>,
}

/// Several branches packed into one run after a shared past (block-causal):
/// row `i` belongs to the branch whose first row is `first[i]`; it sees the
/// whole past and its own branch's rows `first[i]..=i`, never another
/// branch's, and sits at position `past + i - first[i]`, as if its branch
/// had run alone. The layout (tokens concatenated, one first-row index per
/// row, rows to read) is what a GPU kernel would take unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pack {
    pub first: Vec<usize>,
    /// The rows whose head outputs a packed run returns, ascending.
    pub rows: Vec<usize>,
}

/// What one call computes: the output rows and, when asked, the grown past.
pub struct GqaOut {
    pub out: Vec<f32>,
    pub present: Option<(Value, Value)>,
}

impl Gqa {
    fn rotate(&self, x: &mut [f32], pos: usize, d: usize) -> Result<(), OpError> {
        let Some((cos, sin, half)) = &self.rotary else {
            return Ok(());
        };
        if 2 * half != d {
            return Err(OpError::Input(format!(
                "rotary caches are {half} wide but the head dim is {d} (partial rotary is not computed)"
            )));
        }
        let max_pos = cos.len() / half;
        if pos >= max_pos {
            return Err(OpError::Input(format!(
                "position {pos} is beyond the rotary cache's {max_pos}"
            )));
        }
        let (c, s) = (
            &cos[pos * half..(pos + 1) * half],
            &sin[pos * half..(pos + 1) * half],
        );
        for j in 0..*half {
            let (a, b) = (x[j], x[j + half]);
            x[j] = a * c[j] - b * s[j];
            x[j + half] = b * c[j] + a * s[j];
        }
        Ok(())
    }

    /// `q`: `[S, heads·D]`, `k`/`v`: `[S, kv_heads·D]`; `past_*`: `[1,
    /// kv_heads, P, D]`; `total`: P + S as the graph computed it from the
    /// mask; `pack`: the branches of a packed run (no present comes back).
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        mut q: Vec<f32>,
        mut k: Vec<f32>,
        v: &[f32],
        s: usize,
        past_k: &Value,
        past_v: &Value,
        total: usize,
        want_present: bool,
        pack: Option<&Pack>,
        pool: &Pool,
    ) -> Result<GqaOut, OpError> {
        let (hq, hk) = (self.heads, self.kv_heads);
        if s == 0 || q.len() % (s * hq) != 0 {
            return Err(OpError::Input(format!(
                "query of {} values for {s} rows and {hq} heads",
                q.len()
            )));
        }
        let d = q.len() / (s * hq);
        if k.len() != s * hk * d || v.len() != s * hk * d {
            return Err(OpError::Input(format!(
                "key/value of {}/{} values; {s} rows × {hk} heads × {d} expected",
                k.len(),
                v.len()
            )));
        }
        let (pk, pv) = match (past_k.as_f32(), past_v.as_f32()) {
            (Some(a), Some(b)) => (a, b),
            _ => return Err(OpError::Input("the past is not float32".into())),
        };
        if past_k.shape.len() != 4
            || past_k.shape[1] != hk
            || past_k.shape[3] != d
            || past_v.shape != past_k.shape
        {
            return Err(OpError::Input(format!(
                "past of shape {:?}/{:?}; [1, {hk}, P, {d}] expected",
                past_k.shape, past_v.shape
            )));
        }
        let p = past_k.shape[2];
        if total != p + s {
            return Err(OpError::Input(format!(
                "the attention mask covers {total} tokens but past + new is {}: padding is not computed",
                p + s
            )));
        }
        if let Some(pk) = pack {
            if want_present {
                return Err(OpError::Input(
                    "a packed run returns no present: its branches are discarded".into(),
                ));
            }
            if pk.first.len() != s || pk.first.iter().enumerate().any(|(i, &f)| f > i) {
                return Err(OpError::Input(format!(
                    "a pack of {} first-row indices for {s} rows (each at or before its row)",
                    pk.first.len()
                )));
            }
        }
        let first = |i: usize| pack.map_or(0, |pk| pk.first[i]);
        for i in 0..s {
            let pos = p + i - first(i);
            for h in 0..hq {
                self.rotate(&mut q[(i * hq + h) * d..(i * hq + h + 1) * d], pos, d)?;
            }
            for h in 0..hk {
                self.rotate(&mut k[(i * hk + h) * d..(i * hk + h + 1) * d], pos, d)?;
            }
        }
        let scale = if self.scale == 0.0 {
            1.0 / (d as f32).sqrt()
        } else {
            self.scale
        };
        let group = hq / hk;
        // Output per head, `[heads][S][D]`, so each task owns one head.
        let mut per_head = vec![0f32; hq * s * d];
        let (qr, kr) = (&q, &k);
        pool.chunks_mut(&mut per_head, s * d, |h, out| {
            let kh = h / group;
            let key = |t: usize| -> &[f32] {
                if t < p {
                    &pk[(kh * p + t) * d..(kh * p + t + 1) * d]
                } else {
                    &kr[((t - p) * hk + kh) * d..((t - p) * hk + kh + 1) * d]
                }
            };
            let value = |t: usize| -> &[f32] {
                if t < p {
                    &pv[(kh * p + t) * d..(kh * p + t + 1) * d]
                } else {
                    &v[((t - p) * hk + kh) * d..((t - p) * hk + kh + 1) * d]
                }
            };
            let mut scores = vec![0f32; p + s];
            for i in 0..s {
                let qi = &qr[(i * hq + h) * d..(i * hq + h + 1) * d];
                // The past, then this row's branch up to itself: the same
                // tokens in the same order as the branch run alone. A
                // window drops the keys before position `lo`, in the past
                // and in the branch (whose rows sit at positions p..=pos).
                let pos = p + i - first(i);
                let lo = self.window.map_or(0, |w| (pos + 1).saturating_sub(w));
                let seen = || (lo.min(p)..p).chain(p + first(i) + lo.saturating_sub(p)..=p + i);
                let n = (p - lo.min(p)) + (pos + 1 - lo.max(p));
                let mut max = f32::NEG_INFINITY;
                for (t, sc) in seen().zip(scores.iter_mut()) {
                    *sc = dot(qi, key(t)) * scale;
                    max = max.max(*sc);
                }
                let mut sum = 0f32;
                for sc in scores.iter_mut().take(n) {
                    *sc = (*sc - max).exp();
                    sum += *sc;
                }
                let o = &mut out[i * d..(i + 1) * d];
                o.fill(0.0);
                for (t, sc) in seen().zip(scores.iter()) {
                    let w = sc / sum;
                    for (oj, vj) in o.iter_mut().zip(value(t)) {
                        *oj += w * vj;
                    }
                }
            }
        });
        let mut out = vec![0f32; s * hq * d];
        for h in 0..hq {
            for i in 0..s {
                out[(i * hq + h) * d..(i * hq + h + 1) * d]
                    .copy_from_slice(&per_head[(h * s + i) * d..(h * s + i + 1) * d]);
            }
        }
        let present = want_present.then(|| {
            let grow = |past: &[f32], new: &[f32]| {
                let mut g = Vec::with_capacity(hk * (p + s) * d);
                for h in 0..hk {
                    g.extend_from_slice(&past[h * p * d..(h + 1) * p * d]);
                    for i in 0..s {
                        g.extend_from_slice(&new[(i * hk + h) * d..(i * hk + h + 1) * d]);
                    }
                }
                Value::f32(vec![1, hk, p + s, d], g)
            };
            (grow(pk, &k), grow(pv, v))
        });
        Ok(GqaOut { out, present })
    }
}

/// A dot product in 8 independent lanes: a single running sum is one long
/// chain of dependent float additions, which the compiler may not reorder,
/// so it could neither vectorise nor pipeline it (the scores were most of a
/// readout run's time before this).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut tail = 0f32;
    for (x, y) in ra.iter().zip(rb) {
        tail += x * y;
    }
    (acc[0] + acc[4]) + (acc[1] + acc[5]) + (acc[2] + acc[6]) + (acc[3] + acc[7]) + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Uniform in [-0.5, 0.5), from the kernels' own generator.
    fn lcg(seed: &mut u64) -> f32 {
        crate::kernels::simd::lcg(seed) as f32 / (1u64 << 32) as f32 - 0.5
    }

    /// One head, no rotary: a row's output is the softmax-weighted sum over
    /// exactly the `w` keys at positions `pos + 1 - w ..= pos`, written out
    /// directly.
    #[test]
    fn a_window_keeps_the_last_w_keys_in_the_past_and_in_the_run() {
        let (p, s, d, w) = (9usize, 5usize, 8usize, 6usize);
        let mut seed = 7;
        let mut draw = |n: usize| (0..n).map(|_| lcg(&mut seed)).collect::<Vec<f32>>();
        let (pk, pv) = (draw(p * d), draw(p * d));
        let (q, k, v) = (draw(s * d), draw(s * d), draw(s * d));
        let gqa = |window| Gqa {
            heads: 1,
            kv_heads: 1,
            scale: 0.0,
            rotary: None,
            window,
        };
        let past = |x: &[f32]| Value::f32(vec![1, 1, p, d], x.to_vec());
        let pool = Pool::new(1).unwrap();
        let run = |g: Gqa| {
            g.run(
                q.clone(),
                k.clone(),
                &v,
                s,
                &past(&pk),
                &past(&pv),
                p + s,
                false,
                None,
                &pool,
            )
            .unwrap()
            .out
        };
        let windowed = run(gqa(Some(w)));
        let full = run(gqa(None));
        let keys: Vec<&[f32]> = pk.chunks(d).chain(k.chunks(d)).collect();
        let vals: Vec<&[f32]> = pv.chunks(d).chain(v.chunks(d)).collect();
        for i in 0..s {
            let pos = p + i;
            let lo = (pos + 1).saturating_sub(w);
            let qi = &q[i * d..(i + 1) * d];
            let sc: Vec<f64> = (lo..=pos)
                .map(|t| {
                    qi.iter()
                        .zip(keys[t])
                        .map(|(a, b)| (a * b) as f64)
                        .sum::<f64>()
                        / (d as f64).sqrt()
                })
                .collect();
            let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = sc.iter().map(|x| (x - m).exp()).sum();
            for j in 0..d {
                let want: f64 = (lo..=pos)
                    .zip(&sc)
                    .map(|(t, x)| (x - m).exp() / z * vals[t][j] as f64)
                    .sum();
                let got = windowed[i * d + j] as f64;
                assert!(
                    (got - want).abs() < 1e-5,
                    "row {i} lane {j}: {got} vs {want}"
                );
            }
        }
        // The window is narrower than every row's context here, so it changed each row.
        for i in 0..s {
            assert_ne!(
                windowed[i * d..(i + 1) * d],
                full[i * d..(i + 1) * d],
                "row {i}"
            );
        }
    }
}
