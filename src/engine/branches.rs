//! A call's branches against one past (every criterion of a `scoreAll`,
//! every rotation of cyclic debias, every option of a cloze criterion):
//! packed into block-causal passes when the runtime packs, else one run
//! each. The engine asks the runtime what it can do (`branch_budget`) and
//! does not otherwise fork per runtime.

use std::ops::Range;

use super::chunk;
use super::convention::Convention;
use super::EngineError;
use crate::core::read::cloze_math::row_log_prob;
use crate::core::read::logits::Logits;
use crate::core::read::slots::read_slots;
use crate::runtime::{Branch, PackBudget, ReadSpec, RowRead, Runtime};

/// How a call's branches run: packed under a budget, or one by one in runs
/// of at most `limit` tokens (the proven run length).
#[derive(Debug, Clone, Copy)]
pub(super) struct Plan {
    pub conv: Convention,
    pub limit: usize,
    pub budget: Option<PackBudget>,
}

/// Consecutive passes under `budget`, from each branch's (tokens, rows
/// read). A branch that alone exceeds the budget runs by itself through the
/// serial path (`None`): a budget splits a set, it never refuses one.
fn passes(sizes: &[(usize, usize)], budget: PackBudget) -> Vec<(Range<usize>, bool)> {
    let mut out = Vec::new();
    let (mut start, mut tokens, mut rows) = (0, 0, 0);
    for (i, &(t, r)) in sizes.iter().enumerate() {
        let alone = t > budget.tokens || r > budget.rows;
        if start < i && (alone || tokens + t > budget.tokens || rows + r > budget.rows) {
            out.push((start..i, true));
            (start, tokens, rows) = (i, 0, 0);
        }
        if alone {
            out.push((i..i + 1, false));
            start = i + 1;
            continue;
        }
        tokens += t;
        rows += r;
    }
    if start < sizes.len() {
        out.push((start..sizes.len(), true));
    }
    out
}

/// The passes a set of branches will take: packed ranges, and lone ones.
fn plan_passes(plan: &Plan, sizes: &[(usize, usize)]) -> Vec<(Range<usize>, bool)> {
    match plan.budget {
        Some(b) => passes(sizes, b),
        None => (0..sizes.len()).map(|i| (i..i + 1, false)).collect(),
    }
}

/// Reads each branch's `spec` at its last row, after `past`.
pub(super) async fn read_last<R: Runtime>(
    rt: &mut R,
    plan: &Plan,
    past: &R::Kv,
    branches: &[(&[u32], ReadSpec<'_>)],
) -> Result<Vec<RowRead>, EngineError> {
    let sizes: Vec<(usize, usize)> = branches.iter().map(|(ids, _)| (ids.len(), 1)).collect();
    let mut out = Vec::with_capacity(branches.len());
    for (range, packed) in plan_passes(plan, &sizes) {
        if !packed {
            let (ids, spec) = &branches[range.start];
            let (r, _) = chunk::read(rt, plan.conv, plan.limit, Some(past), ids, spec).await?;
            out.push(r);
            continue;
        }
        let part = &branches[range];
        let rows: Vec<Vec<usize>> = part
            .iter()
            .map(|(ids, _)| vec![ids.len().saturating_sub(1)])
            .collect();
        let logits = pass(rt, past, part.iter().map(|(ids, _)| *ids), &rows).await?;
        for ((_, spec), l) in part.iter().zip(&logits) {
            let slots = read_slots(l, spec.head, spec.columns, spec.allowed_mass)?;
            out.push(RowRead {
                slots,
                dims: l.dims.clone(),
                hidden: None,
            });
        }
    }
    Ok(out)
}

/// Shortest prefix worth running once for a group: below it, the child
/// past's copy of the state's keys and values (per layer, the whole past)
/// costs about what the tokens saved would.
const MIN_SHARED: usize = 4;

/// `read_last` for branches in `groups` (consecutive ranges that cover
/// them), where a group's branches share a prefix: the rotations of one
/// criterion under cyclic debias list the same question before their
/// options. When the runtime packs, that prefix runs once as a child past
/// and only the rest of each branch is packed after it, so cyclic debias
/// pays for the question once, not once per rotation. The results are the
/// same numbers: every row sees the same keys in the same order, and a
/// packed row equals it run alone (`Pack`). Groups of one, or with a
/// prefix under `MIN_SHARED`, are packed together after `past` as before;
/// a serial runtime runs every branch whole.
pub(super) async fn read_last_grouped<R: Runtime>(
    rt: &mut R,
    plan: &Plan,
    past: &R::Kv,
    branches: &[(&[u32], ReadSpec<'_>)],
    groups: &[Range<usize>],
) -> Result<Vec<RowRead>, EngineError> {
    if plan.budget.is_none() {
        return read_last(rt, plan, past, branches).await;
    }
    let mut out: Vec<Option<RowRead>> = vec![None; branches.len()];
    let mut loose = Vec::new();
    for g in groups {
        let part = &branches[g.clone()];
        let shared = shared_prefix(part.iter().map(|(ids, _)| *ids));
        if part.len() < 2 || shared < MIN_SHARED {
            loose.extend(g.clone());
            continue;
        }
        let child =
            chunk::extend(rt, plan.conv, plan.limit, Some(past), &part[0].0[..shared]).await?;
        let tails: Vec<(&[u32], ReadSpec<'_>)> = part
            .iter()
            .map(|(ids, spec)| (&ids[shared..], *spec))
            .collect();
        let reads = read_last(rt, plan, &child, &tails).await;
        rt.release(child);
        for (slot, r) in out[g.clone()].iter_mut().zip(reads?) {
            *slot = Some(r);
        }
    }
    if !loose.is_empty() {
        let set: Vec<(&[u32], ReadSpec<'_>)> = loose.iter().map(|&i| branches[i]).collect();
        for (&i, r) in loose.iter().zip(read_last(rt, plan, past, &set).await?) {
            out[i] = Some(r);
        }
    }
    out.into_iter()
        .map(|r| {
            r.ok_or(EngineError::EmptyRun {
                what: "a branch outside every group",
            })
        })
        .collect()
}

/// The tokens every branch starts with, leaving each at least one of its
/// own (the row it is read at).
fn shared_prefix<'a>(mut ids: impl Iterator<Item = &'a [u32]>) -> usize {
    let Some(first) = ids.next() else { return 0 };
    let mut n = first.len().saturating_sub(1);
    for other in ids {
        n = n.min(other.len().saturating_sub(1));
        n = first[..n]
            .iter()
            .zip(other)
            .take_while(|(a, b)| a == b)
            .count();
    }
    n
}

/// Per branch `(ids, targets)`: log p(`targets[i]`) at each of the last
/// `targets.len()` rows of `past` + `ids` (the row that predicts it).
pub(super) async fn log_probs<R: Runtime>(
    rt: &mut R,
    plan: &Plan,
    past: &R::Kv,
    branches: &[(&[u32], &[u32])],
) -> Result<Vec<Vec<f64>>, EngineError> {
    for (ids, targets) in branches {
        if ids.is_empty() || targets.len() > ids.len() {
            return Err(EngineError::TargetsOverTokens {
                targets: targets.len(),
                tokens: ids.len(),
            });
        }
    }
    let sizes: Vec<(usize, usize)> = branches
        .iter()
        .map(|(ids, t)| (ids.len(), t.len()))
        .collect();
    let mut out = Vec::with_capacity(branches.len());
    for (range, packed) in plan_passes(plan, &sizes) {
        if !packed {
            let (ids, targets) = branches[range.start];
            out.push(
                chunk::token_log_probs(rt, plan.conv, plan.limit, Some(past), ids, targets).await?,
            );
            continue;
        }
        let part = &branches[range];
        let rows: Vec<Vec<usize>> = part
            .iter()
            .map(|(ids, t)| (ids.len() - t.len()..ids.len()).collect())
            .collect();
        let logits = pass(rt, past, part.iter().map(|(ids, _)| *ids), &rows).await?;
        for ((_, targets), l) in part.iter().zip(&logits) {
            out.push(gather(l, targets)?);
        }
    }
    Ok(out)
}

/// One packed pass: each branch's ids and the rows it reads.
async fn pass<'a, R: Runtime>(
    rt: &mut R,
    past: &R::Kv,
    ids: impl Iterator<Item = &'a [u32]>,
    rows: &[Vec<usize>],
) -> Result<Vec<Logits>, EngineError> {
    let set: Vec<Branch<'_>> = ids
        .zip(rows)
        .map(|(ids, r)| Branch { ids, rows: r })
        .collect();
    Ok(rt.run_branches(past, &set).await?)
}

fn gather(l: &Logits, targets: &[u32]) -> Result<Vec<f64>, EngineError> {
    targets
        .iter()
        .enumerate()
        .map(|(row, &t)| row_log_prob(l, row, t).map_err(EngineError::from))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: PackBudget = PackBudget {
        tokens: 10,
        rows: 3,
    };

    #[test]
    fn a_shared_prefix_leaves_each_branch_a_token_of_its_own() {
        let (a, b, c): (&[u32], &[u32], &[u32]) = (&[1, 2, 3, 4], &[1, 2, 3, 5, 6], &[1, 2]);
        assert_eq!(shared_prefix([a, b].into_iter()), 3);
        assert_eq!(shared_prefix([a, a].into_iter()), 3);
        assert_eq!(shared_prefix([a, b, c].into_iter()), 1);
        assert_eq!(shared_prefix([b, a].into_iter()), 3);
        assert_eq!(shared_prefix([a].into_iter()), 3);
        assert_eq!(shared_prefix(std::iter::empty()), 0);
    }

    #[test]
    fn a_set_over_the_budget_is_split_not_refused() {
        let p = passes(&[(4, 1), (4, 1), (4, 1), (2, 1)], B);
        assert_eq!(p, vec![(0..2, true), (2..4, true)]);
    }

    #[test]
    fn rows_split_a_pass_too() {
        let p = passes(&[(1, 2), (1, 2), (1, 1)], B);
        assert_eq!(p, vec![(0..1, true), (1..3, true)]);
    }

    #[test]
    fn a_branch_over_the_budget_runs_alone_on_the_serial_path() {
        let p = passes(&[(3, 1), (11, 1), (3, 1), (3, 4)], B);
        assert_eq!(
            p,
            vec![(0..1, true), (1..2, false), (2..3, true), (3..4, false)]
        );
    }

    #[test]
    fn every_branch_is_in_exactly_one_pass() {
        let sizes: Vec<(usize, usize)> = (0..40).map(|i| (1 + i % 7, 1 + i % 3)).collect();
        let p = passes(&sizes, B);
        let covered: Vec<usize> = p.iter().flat_map(|(r, _)| r.clone()).collect();
        assert_eq!(covered, (0..40).collect::<Vec<_>>());
        for (r, packed) in &p {
            let t: usize = sizes[r.clone()].iter().map(|s| s.0).sum();
            let rows: usize = sizes[r.clone()].iter().map(|s| s.1).sum();
            assert!(!packed || (t <= B.tokens && rows <= B.rows), "{r:?}");
        }
    }
}
