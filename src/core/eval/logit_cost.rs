//! The `logit_cost` sweep (spec §11; the published logit_cost study):
//! the token ids every runner feeds, and the statistics every runner reports.
//! Native and browser take both from here, so their numbers are computed on
//! identical ids by identical arithmetic.

use serde::Serialize;

use crate::core::text::tokenizer::TextTokenizer;
use crate::core::CoreError;

/// Plain English prose, so the ids are ordinary text for any tokenizer.
const FILLER: &str = "the harbour office keeps a ledger of every ship that docks and on each morning the clerk writes \
the name of the vessel the port it came from the cargo it carries the weight in tonnes and the time it tied up at the quay \
while the pilots report the weather the tide and any delay so that the harbour master can plan the berths for the day ";

/// The published sweep: suffix lengths after one fixed prefix.
pub const PREFIX_TOKENS: usize = 256;
pub const SUFFIX_LENGTHS: [usize; 6] = [1, 8, 16, 32, 64, 96];

/// The prefix (`prefix` ids) and one suffix per length, all cut from one
/// run of filler text, so every suffix continues the prefix.
pub fn sweep_ids(
    tok: &TextTokenizer,
    prefix: usize,
    lengths: &[usize],
) -> Result<(Vec<u32>, Vec<Vec<u32>>), CoreError> {
    let longest = lengths.iter().copied().max().unwrap_or(0);
    let need = prefix + longest;
    let mut text = String::new();
    let mut ids = Vec::new();
    while ids.len() < need {
        text.push_str(FILLER);
        ids = tok.encode(&text)?;
    }
    let suffixes = lengths
        .iter()
        .map(|&n| ids[prefix..prefix + n].to_vec())
        .collect();
    ids.truncate(prefix);
    Ok((ids, suffixes))
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// ms = fixed + per_token × n, least squares, with its R².
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fit {
    pub fixed_ms: f64,
    pub per_token_ms: f64,
    pub r2: f64,
}

/// `None` when fewer than two distinct lengths make the line undefined.
pub fn fit(xs: &[f64], ys: &[f64]) -> Option<Fit> {
    let n = xs.len().min(ys.len());
    if n < 2 {
        return None;
    }
    let (mx, my) = (
        xs[..n].iter().sum::<f64>() / n as f64,
        ys[..n].iter().sum::<f64>() / n as f64,
    );
    let sxx: f64 = xs[..n].iter().map(|x| (x - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = xs[..n]
        .iter()
        .zip(&ys[..n])
        .map(|(x, y)| (x - mx) * (y - my))
        .sum();
    let per_token = sxy / sxx;
    let fixed = my - per_token * mx;
    let ss_tot: f64 = ys[..n].iter().map(|y| (y - my).powi(2)).sum();
    let ss_res: f64 = xs[..n]
        .iter()
        .zip(&ys[..n])
        .map(|(x, y)| (y - fixed - per_token * x).powi(2))
        .sum();
    let r2 = if ss_tot == 0.0 {
        1.0
    } else {
        1.0 - ss_res / ss_tot
    };
    Some(Fit {
        fixed_ms: fixed,
        per_token_ms: per_token,
        r2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_the_published_line() {
        // The published logit_cost study: 1 → 32.1 … 96 → 339.6 ms; its fit is 28.4 + 3.23 × n.
        let xs = [1.0, 8.0, 16.0, 32.0, 64.0, 96.0];
        let ys = [32.1, 54.0, 80.0, 132.4, 233.6, 339.6];
        let f = fit(&xs, &ys).unwrap();
        assert!((f.fixed_ms - 28.4).abs() < 0.5, "{f:?}");
        assert!((f.per_token_ms - 3.23).abs() < 0.01, "{f:?}");
        assert!(f.r2 > 0.999 && f.r2 <= 1.0, "{f:?}");
    }

    #[test]
    fn fit_of_an_exact_line_is_exact_and_undefined_on_one_length() {
        let f = fit(&[1.0, 2.0, 4.0], &[12.0, 14.0, 18.0]).unwrap();
        assert!(
            (f.fixed_ms - 10.0).abs() < 1e-12
                && (f.per_token_ms - 2.0).abs() < 1e-12
                && (f.r2 - 1.0).abs() < 1e-12
        );
        assert_eq!(fit(&[8.0, 8.0], &[1.0, 2.0]), None);
        assert_eq!(fit(&[8.0], &[1.0]), None);
    }

    #[test]
    fn median_of_odd_even_and_unsorted() {
        assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
