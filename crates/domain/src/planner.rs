//! The operation-run planner: the pure part of turning a candidate scope into
//! the frozen, ordered, phased list of rack targets a run is created with
//! (spec operation-runs §2.1 steps 3–9, §2.4–§2.6).
//!
//! This module owns:
//! - normalising and merging candidate entries by rack ([`normalize_candidates`]),
//! - subtracting the targets of excluded prior runs ([`subtract_exclusions`]),
//! - the SHA-256 seeded order shared by the percentage selector and random
//!   ordering ([`seeded_order`], [`select_percentage`]),
//! - phase allocation by cumulative integer ceilings ([`phase_sizes`]),
//! - materialising sequence and phase indexes ([`plan_targets`]),
//! - the candidate-scope limit ([`check_candidate_limit`]).
//!
//! Resolving target specs and reading the inventory or prior runs is the
//! caller's job; everything here is deterministic in its inputs (seeds are
//! passed in, never generated), so the same seed picks the same cohort as the
//! reference service.

use std::collections::HashMap;

use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::run::{OrderingPolicy, PhasePlan, Selector};
use crate::{ComponentSetError, ComponentsByType};

/// Default limit on the candidate scope of one run, counted in racks after
/// merging (decision D5).
///
/// A run's candidate scope is its worst-case blast radius: every rack in it
/// may end up running the operation. The operator guide promises at most
/// "100 rack targets" per run, and the reference service uses the same
/// constant, so clients see the same limit and message. Larger fleets are
/// covered by several runs (with exclusions), which keeps each run reviewable.
/// Deployments may configure another value; 0 means unlimited.
pub const DEFAULT_MAX_CANDIDATE_TARGETS: usize = 100;

/// Why planning failed. `Display` texts are the reference messages; wrapping
/// (`normalize <source>: …`, `operation run plan is invalid: …`) and the gRPC
/// status are the caller's business.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A candidate entry without a rack id; the index is the entry's position
    /// in the list given to [`normalize_candidates`].
    #[error("targets[{0}].rack_id is required")]
    MissingRackId(usize),
    /// An entry's component set breaks the §5.5 rules, or merging two
    /// entries of one rack puts a component under two types.
    #[error(transparent)]
    ComponentSet(#[from] ComponentSetError),
    /// The candidate scope is larger than the configured limit.
    #[error("operation run candidate scope exceeds target limit {limit}")]
    CandidateLimit { limit: usize },
    /// `physical_location` ordering is not implemented yet (decision D8).
    #[error("physical_location ordering is not supported yet")]
    PhysicalLocationUnsupported,
    /// Count phases ask for more targets than were selected. A distinct
    /// variant because the project maps it to InvalidArgument (decision D4)
    /// while the reference reported it as Internal.
    #[error("count phase counts exceed selected target count")]
    CountOverflow,
    /// A phase would hold no target; `phase` is 1-based.
    #[error(
        "configured operation run phase has no targets: {kind} phase {phase} resolves to zero targets for {selected} selected targets"
    )]
    ZeroTargetPhase {
        kind: &'static str,
        phase: usize,
        selected: usize,
    },
    /// A phase plan that validation (§5.4) should have rejected; the planner
    /// refuses it rather than divide by zero or leave targets unassigned. The
    /// text is the §5.4 validation message.
    #[error("{0}")]
    InvalidPhasePlan(&'static str),
    /// A selector percentage outside 1..=100 that validation (§5.3) should
    /// have rejected.
    #[error("percentage selector must be between 1 and 100")]
    InvalidPercentage,
    /// More selected targets than an `i32` sequence index can number.
    #[error("operation run selects {0} targets, more than can be indexed")]
    TooManyTargets(usize),
}

/// One rack of the candidate scope with the components the run would touch.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateEntry {
    pub rack_id: Uuid,
    pub components: ComponentsByType,
}

/// One planned (not yet stored) target row.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedTarget {
    pub rack_id: Uuid,
    /// Position in the ordered selection, 0..n-1 across all phases.
    pub sequence_index: i32,
    /// 0-based phase.
    pub phase_index: i32,
    /// Frozen copy with every type's ids sorted.
    pub components_by_type: ComponentsByType,
}

/// The outcome of planning: targets in sequence order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub targets: Vec<PlannedTarget>,
    /// Size of each phase, in phase order; sums to `targets.len()`.
    pub phase_sizes: Vec<usize>,
    /// Racks in the candidate scope before selection.
    pub candidate_count: usize,
}

impl Plan {
    /// `max(phase_index) + 1`, or 0 for an empty plan. The stored run's
    /// `total_phases` comes from here, never from the caller (§2.1 step 10).
    pub fn total_phases(&self) -> i32 {
        self.targets
            .iter()
            .map(|t| t.phase_index.saturating_add(1))
            .max()
            .unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }
}

/// §2.1 step 3: checks rack ids, normalises each entry's component set and
/// merges entries of the same rack into the first occurrence.
///
/// Racks keep the order of their first occurrence (the seeded order makes it
/// irrelevant for planning, but callers and tests see a stable list). The
/// returned component lists are sorted, so equal scopes compare equal however
/// they were assembled.
pub fn normalize_candidates(
    entries: Vec<CandidateEntry>,
) -> Result<Vec<CandidateEntry>, PlanError> {
    let mut out: Vec<CandidateEntry> = Vec::with_capacity(entries.len());
    let mut position: HashMap<Uuid, usize> = HashMap::with_capacity(entries.len());
    for (i, entry) in entries.into_iter().enumerate() {
        if entry.rack_id.is_nil() {
            return Err(PlanError::MissingRackId(i));
        }
        let components = entry.components.into_normalized()?;
        match position.get(&entry.rack_id) {
            // `at` was recorded when the entry was pushed, so it is in range.
            Some(&at) => out[at].components.merge(&components)?,
            None => {
                position.insert(entry.rack_id, out.len());
                out.push(CandidateEntry {
                    rack_id: entry.rack_id,
                    components,
                });
            }
        }
    }
    for entry in &mut out {
        entry.components.sort_ids();
    }
    Ok(out)
}

/// §2.1 step 5: removes, per rack and per component type, every component of
/// the excluded runs' targets. A rack left without components is dropped; a
/// partially excluded rack keeps the rest.
///
/// Excluded rows are grouped by rack and subtracted one after another, which
/// equals subtracting their per-rack union but cannot fail: prior runs may
/// disagree about a component's type (the inventory changed in between), and
/// that must not block excluding them.
pub fn subtract_exclusions(
    candidates: Vec<CandidateEntry>,
    excluded: &[CandidateEntry],
) -> Vec<CandidateEntry> {
    if excluded.is_empty() {
        return candidates;
    }
    let mut by_rack: HashMap<Uuid, Vec<&ComponentsByType>> = HashMap::new();
    for entry in excluded {
        by_rack
            .entry(entry.rack_id)
            .or_default()
            .push(&entry.components);
    }
    candidates
        .into_iter()
        .filter_map(|mut candidate| {
            if let Some(sets) = by_rack.get(&candidate.rack_id) {
                for set in sets {
                    candidate.components.subtract(set);
                }
                candidate.components.remove_empty();
            }
            (!candidate.components.is_empty()).then_some(candidate)
        })
        .collect()
}

/// SHA-256 of `seed:uuid`, the score a rack sorts by.
fn seed_score(seed: &str, rack_text: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(seed.as_bytes());
    hasher.update(b":");
    hasher.update(rack_text.as_bytes());
    hasher.finalize().into()
}

/// §2.5: orders racks ascending by SHA-256(`seed + ":" + uuid`) (canonical
/// lowercase hyphenated uuid, digest compared as unsigned bytes), ties by the
/// uuid text.
///
/// The order is a function of the seed and the *set* of ids: input order does
/// not matter and duplicates are returned once. Because each rack's score
/// depends only on its own id, ordering a subset gives the restriction of the
/// full order — which is what makes percentage selection monotone.
pub fn seeded_order(seed: &str, rack_ids: &[Uuid]) -> Vec<Uuid> {
    let mut scored: Vec<([u8; 32], String, Uuid)> = rack_ids
        .iter()
        .map(|id| {
            let text = id.hyphenated().to_string();
            (seed_score(seed, &text), text, *id)
        })
        .collect();
    scored.sort();
    // Equal ids sort next to each other (same digest and text).
    scored.dedup_by(|a, b| a.2 == b.2);
    scored.into_iter().map(|(_, _, id)| id).collect()
}

/// §2.5: the first `ceil(n × percentage / 100)` racks of the seeded order,
/// returned in that order (n counts distinct ids).
///
/// `percentage` is validated to 1..=100 elsewhere (§5.3); out-of-range values
/// are clamped here so the function is total: ≤0 selects nothing, >100 all.
pub fn select_percentage(seed: &str, rack_ids: &[Uuid], percentage: i32) -> Vec<Uuid> {
    let mut ordered = seeded_order(seed, rack_ids);
    let n = ordered.len() as u128;
    let p = u128::from(percentage.clamp(0, 100).unsigned_abs());
    // Integer ceiling, exactly the reference's (n·p + 99) / 100.
    let take = (n * p).div_ceil(100);
    ordered.truncate(usize::try_from(take).unwrap_or(usize::MAX));
    ordered
}

/// Sizes from cumulative end positions `ceil(n · num_i / den)`, stopping at
/// the first empty phase. Stopping early also bounds the work: a plan with
/// more phases than targets fails within `n + 1` phases, so a huge
/// `phase_count` cannot make us allocate a huge vector.
fn cumulative_sizes(
    kind: &'static str,
    n: usize,
    den: u128,
    cumulative_numerators: impl Iterator<Item = u128>,
) -> Result<Vec<usize>, PlanError> {
    let total = n as u128;
    let mut sizes = Vec::new();
    let mut previous_end: u128 = 0;
    for (i, num) in cumulative_numerators.enumerate() {
        let end = (total * num).div_ceil(den);
        let size = end.saturating_sub(previous_end);
        if size == 0 {
            return Err(PlanError::ZeroTargetPhase {
                kind,
                phase: i + 1,
                selected: n,
            });
        }
        // size ≤ n, so it fits in usize.
        sizes.push(usize::try_from(size).unwrap_or(usize::MAX));
        previous_end = end;
    }
    Ok(sizes)
}

/// §2.6: how many of `n` ordered targets each phase gets.
///
/// - `equal(k)`: boundaries `ceil(n·i/k)`, so the larger phases come first;
/// - `percentage(p1..pm)`: cumulative ends `ceil(n·(p1+…+pj)/100)`;
/// - `count(c1..cm)`: `c1..cm` plus a remainder phase when targets are left;
///   more than `n` in total is [`PlanError::CountOverflow`].
///
/// Any empty phase is [`PlanError::ZeroTargetPhase`] (1-based phase number).
/// Cumulative rounding (rather than rounding each phase) guarantees the sizes
/// sum to exactly `n`. Integer arithmetic only (u128 products), so there is
/// no float rounding and no overflow.
pub fn phase_sizes(n: usize, plan: &PhasePlan) -> Result<Vec<usize>, PlanError> {
    match plan {
        PhasePlan::Equal { phase_count } => {
            if *phase_count <= 0 {
                return Err(PlanError::InvalidPhasePlan(
                    "equal phase_count must be greater than 0",
                ));
            }
            let k = u128::from(phase_count.unsigned_abs());
            cumulative_sizes("equal", n, k, 1..=k)
        }
        PhasePlan::Percentage { phases } => {
            if phases.is_empty() {
                return Err(PlanError::InvalidPhasePlan(
                    "percentage phase policy must include at least one phase",
                ));
            }
            if phases.iter().any(|p| !(1..=100).contains(&p.percentage)) {
                return Err(PlanError::InvalidPhasePlan(
                    "percentage phase percentages must be between 1 and 100",
                ));
            }
            // Each value is 1..=100, so the u128 sum cannot overflow.
            let sum: u128 = phases
                .iter()
                .map(|p| u128::from(p.percentage.unsigned_abs()))
                .sum();
            // Anything but 100 would leave targets unassigned or overrun N.
            if sum != 100 {
                return Err(PlanError::InvalidPhasePlan(
                    "percentage phase percentages must sum to 100",
                ));
            }
            let cumulative = phases.iter().scan(0u128, |acc, p| {
                *acc += u128::from(p.percentage.unsigned_abs());
                Some(*acc)
            });
            cumulative_sizes("percentage", n, 100, cumulative)
        }
        PhasePlan::Count { phases } => {
            if phases.is_empty() {
                return Err(PlanError::InvalidPhasePlan(
                    "count phase policy must include at least one phase",
                ));
            }
            if phases.iter().any(|c| c.count <= 0) {
                return Err(PlanError::InvalidPhasePlan(
                    "count phase counts must be greater than 0",
                ));
            }
            let total = n as u128;
            let mut sizes = Vec::with_capacity(phases.len() + 1);
            let mut running: u128 = 0;
            for phase in phases {
                let count = phase.count.unsigned_abs() as usize;
                running += count as u128;
                // Checked as we go, like the reference: the first phase that
                // overruns the selection fails the plan.
                if running > total {
                    return Err(PlanError::CountOverflow);
                }
                sizes.push(count);
            }
            // running ≤ n here, so the remainder is exact.
            let remainder = n - usize::try_from(running).unwrap_or(n);
            if remainder > 0 {
                sizes.push(remainder);
            }
            // Counts are > 0 and the remainder is only added when > 0, so no
            // phase is empty; the check mirrors the reference's final pass.
            if let Some(i) = sizes.iter().position(|s| *s == 0) {
                return Err(PlanError::ZeroTargetPhase {
                    kind: "count",
                    phase: i + 1,
                    selected: n,
                });
            }
            Ok(sizes)
        }
    }
}

/// §2.1 steps 6–9: selects, orders and phases the candidates.
///
/// `candidates` are expected normalised ([`normalize_candidates`]) and with
/// exclusions subtracted ([`subtract_exclusions`]). Should a rack still occur
/// twice, its entries are merged here, so a rack is never planned twice.
/// An empty candidate list is an empty plan, without looking at selector or
/// options (§2.1 steps 4 and 6); the caller turns that into "no planned
/// targets".
pub fn plan_targets(
    candidates: Vec<CandidateEntry>,
    selector: &Selector,
    ordering: &OrderingPolicy,
    phases: &PhasePlan,
) -> Result<Plan, PlanError> {
    if candidates.is_empty() {
        return Ok(Plan::default());
    }

    let mut by_rack: HashMap<Uuid, ComponentsByType> = HashMap::with_capacity(candidates.len());
    let mut rack_ids = Vec::with_capacity(candidates.len());
    for entry in candidates {
        match by_rack.get_mut(&entry.rack_id) {
            Some(existing) => existing.merge(&entry.components)?,
            None => {
                rack_ids.push(entry.rack_id);
                by_rack.insert(entry.rack_id, entry.components);
            }
        }
    }
    let candidate_count = rack_ids.len();

    let selected = match selector {
        Selector::Percentage { percentage, seed } => {
            if !(1..=100).contains(percentage) {
                return Err(PlanError::InvalidPercentage);
            }
            select_percentage(seed, &rack_ids, *percentage)
        }
    };

    let ordered = match ordering {
        // An independent seed, so the cohort and its rollout order are
        // uncorrelated.
        OrderingPolicy::Random { seed } => seeded_order(seed, &selected),
        OrderingPolicy::PhysicalLocation { .. } => {
            return Err(PlanError::PhysicalLocationUnsupported);
        }
    };

    let n = ordered.len();
    // Bound once so every sequence and phase index below fits in i32.
    if i32::try_from(n).is_err() {
        return Err(PlanError::TooManyTargets(n));
    }
    let sizes = phase_sizes(n, phases)?;

    let mut targets = Vec::with_capacity(n);
    let mut ids = ordered.into_iter();
    for (phase_index, size) in (0i32..).zip(sizes.iter()) {
        for rack_id in ids.by_ref().take(*size) {
            let mut components_by_type = by_rack.remove(&rack_id).unwrap_or_default();
            components_by_type.sort_ids();
            let sequence_index = i32::try_from(targets.len()).unwrap_or(i32::MAX);
            targets.push(PlannedTarget {
                rack_id,
                sequence_index,
                phase_index,
                components_by_type,
            });
        }
    }

    Ok(Plan {
        targets,
        phase_sizes: sizes,
        candidate_count,
    })
}

/// §2.4 / D5: fails once `count` racks exceed `limit`; a limit of 0 means
/// unlimited.
pub fn check_candidate_limit(count: usize, limit: usize) -> Result<(), PlanError> {
    if limit != 0 && count > limit {
        return Err(PlanError::CandidateLimit { limit });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ComponentType;
    use crate::run::{CountPhase, LocationStrategy, PercentagePhase};

    /// The upstream fixture id `00000000-0000-0000-0000-0000000000NN`, with
    /// NN written in decimal digits (rack 10 is `…000000000010`).
    fn rack(n: u32) -> Uuid {
        Uuid::parse_str(&format!("00000000-0000-0000-0000-{n:012}")).unwrap()
    }

    fn racks(range: std::ops::RangeInclusive<u32>) -> Vec<Uuid> {
        range.map(rack).collect()
    }

    fn comp(n: u128) -> Uuid {
        Uuid::from_u128(0xC000_0000 + n)
    }

    fn set(groups: &[(ComponentType, &[u128])]) -> ComponentsByType {
        let mut out = ComponentsByType::new();
        for (ty, ids) in groups {
            for id in *ids {
                out.push(*ty, comp(*id));
            }
        }
        out
    }

    fn entry(rack_id: Uuid, groups: &[(ComponentType, &[u128])]) -> CandidateEntry {
        CandidateEntry {
            rack_id,
            components: set(groups),
        }
    }

    fn compute_entry(n: u32) -> CandidateEntry {
        entry(rack(n), &[(ComponentType::Compute, &[u128::from(n)])])
    }

    /// Rack numbers back from fixture ids (the hex digits read as decimal).
    fn nums(ids: &[Uuid]) -> Vec<u32> {
        ids.iter()
            .map(|id| {
                let text = id.simple().to_string();
                text.parse::<u32>().unwrap()
            })
            .collect()
    }

    fn equal(k: i32) -> PhasePlan {
        PhasePlan::Equal { phase_count: k }
    }

    fn pct(ps: &[i32]) -> PhasePlan {
        PhasePlan::Percentage {
            phases: ps
                .iter()
                .map(|p| PercentagePhase { percentage: *p })
                .collect(),
        }
    }

    fn count(cs: &[i32]) -> PhasePlan {
        PhasePlan::Count {
            phases: cs.iter().map(|c| CountPhase { count: *c }).collect(),
        }
    }

    fn selector(percentage: i32, seed: &str) -> Selector {
        Selector::Percentage {
            percentage,
            seed: seed.into(),
        }
    }

    fn random(seed: &str) -> OrderingPolicy {
        OrderingPolicy::Random { seed: seed.into() }
    }

    fn zero_phase_message(kind: &str, phase: usize, n: usize) -> String {
        format!(
            "configured operation run phase has no targets: {kind} phase {phase} resolves to zero targets for {n} selected targets"
        )
    }

    // ---- §2.5 seeded scoring -------------------------------------------

    #[test]
    fn fixture_ids_are_decimal_text() {
        assert_eq!(rack(10).to_string(), "00000000-0000-0000-0000-000000000010");
        assert_eq!(rack(3).to_string(), "00000000-0000-0000-0000-000000000003");
        assert_eq!(nums(&[rack(10), rack(7)]), [10, 7]);
    }

    #[test]
    fn seeded_order_reproduces_the_worked_examples() {
        let table: [(u32, &str, &[u32]); 6] = [
            (10, "selector-seed", &[4, 2, 3, 10, 5, 1, 7, 6, 9, 8]),
            (10, "ordering-seed", &[7, 9, 4, 3, 10, 6, 1, 5, 2, 8]),
            (8, "ordering-seed-a", &[4, 3, 5, 2, 8, 1, 7, 6]),
            (8, "ordering-seed-b", &[3, 8, 4, 5, 6, 2, 1, 7]),
            (3, "selector-seed", &[2, 3, 1]),
            (3, "ordering-seed", &[3, 1, 2]),
        ];
        for (n, seed, expected) in table {
            let ids = racks(1..=n);
            assert_eq!(nums(&seeded_order(seed, &ids)), expected, "1..{n} {seed}");
            let reversed: Vec<Uuid> = ids.iter().rev().copied().collect();
            assert_eq!(nums(&seeded_order(seed, &reversed)), expected);
        }
    }

    #[test]
    fn seeded_order_uses_sha256_of_seed_colon_uuid() {
        // sha256("ordering-seed:00000000-0000-0000-0000-000000000007") is the
        // smallest of racks 1..10; recompute it independently of the sort.
        let text = "ordering-seed:00000000-0000-0000-0000-000000000007";
        let direct: [u8; 32] = Sha256::digest(text.as_bytes()).into();
        assert_eq!(
            seed_score("ordering-seed", &rack(7).hyphenated().to_string()),
            direct
        );
        let smallest = racks(1..=10)
            .into_iter()
            .map(|id| seed_score("ordering-seed", &id.to_string()))
            .min()
            .unwrap();
        assert_eq!(smallest, direct);
    }

    #[test]
    fn seeded_order_returns_duplicates_once_and_handles_empty() {
        let ids = [rack(1), rack(2), rack(1), rack(3), rack(2)];
        assert_eq!(nums(&seeded_order("selector-seed", &ids)), [2, 3, 1]);
        assert!(seeded_order("s", &[]).is_empty());
    }

    #[test]
    fn percentage_selection_reproduces_the_worked_examples() {
        let ids = racks(1..=10);
        let cases: [(i32, &[u32]); 5] = [
            (1, &[4]),
            (10, &[4]),
            (25, &[4, 2, 3]),
            (50, &[4, 2, 3, 10, 5]),
            (99, &[4, 2, 3, 10, 5, 1, 7, 6, 9, 8]),
        ];
        for (p, expected) in cases {
            let picked = select_percentage("selector-seed", &ids, p);
            assert_eq!(nums(&picked), expected, "{p}%");
            assert_eq!(picked, select_percentage("selector-seed", &ids, p));
        }
        // 1% of 3 racks → 1 rack [doc].
        assert_eq!(
            nums(&select_percentage("selector-seed", &racks(1..=3), 1)),
            [2]
        );
        assert_eq!(select_percentage("selector-seed", &ids, 100).len(), 10);
    }

    #[test]
    fn percentage_selection_clamps_out_of_range_values() {
        let ids = racks(1..=4);
        assert!(select_percentage("s", &ids, 0).is_empty());
        assert!(select_percentage("s", &ids, -5).is_empty());
        assert_eq!(select_percentage("s", &ids, 1000).len(), 4);
        assert_eq!(select_percentage("s", &ids, i32::MAX).len(), 4);
    }

    // ---- §2.6 phase allocation -----------------------------------------

    #[test]
    fn equal_phases_match_the_worked_examples() {
        assert_eq!(phase_sizes(10, &equal(3)).unwrap(), [4, 3, 3]);
        assert_eq!(phase_sizes(5, &equal(3)).unwrap(), [2, 2, 1]);
        assert_eq!(phase_sizes(7, &equal(3)).unwrap(), [3, 2, 2]);
        assert_eq!(phase_sizes(3, &equal(2)).unwrap(), [2, 1]);
        assert_eq!(phase_sizes(4, &equal(1)).unwrap(), [4]);
        let err = phase_sizes(2, &equal(10)).unwrap_err();
        assert_eq!(
            err,
            PlanError::ZeroTargetPhase {
                kind: "equal",
                phase: 2,
                selected: 2
            }
        );
        assert_eq!(err.to_string(), zero_phase_message("equal", 2, 2));
    }

    #[test]
    fn huge_equal_phase_count_fails_fast() {
        let err = phase_sizes(3, &equal(i32::MAX)).unwrap_err();
        assert_eq!(err.to_string(), zero_phase_message("equal", 2, 3));
    }

    #[test]
    fn percentage_phases_match_the_worked_examples() {
        assert_eq!(phase_sizes(10, &pct(&[10, 30, 60])).unwrap(), [1, 3, 6]);
        assert_eq!(phase_sizes(7, &pct(&[50, 50])).unwrap(), [4, 3]);
        assert_eq!(
            phase_sizes(2, &pct(&[10, 30, 60])).unwrap_err().to_string(),
            zero_phase_message("percentage", 2, 2)
        );
        assert_eq!(
            phase_sizes(5, &pct(&[10, 10, 80])).unwrap_err().to_string(),
            zero_phase_message("percentage", 2, 5)
        );
    }

    #[test]
    fn count_phases_match_the_worked_examples() {
        assert_eq!(phase_sizes(10, &count(&[2, 3])).unwrap(), [2, 3, 5]);
        assert_eq!(phase_sizes(5, &count(&[2, 3])).unwrap(), [2, 3]);
        let err = phase_sizes(5, &count(&[3, 3])).unwrap_err();
        assert_eq!(err, PlanError::CountOverflow);
        assert_eq!(
            err.to_string(),
            "count phase counts exceed selected target count"
        );
        assert_eq!(
            phase_sizes(5, &count(&[i32::MAX, i32::MAX])).unwrap_err(),
            PlanError::CountOverflow
        );
    }

    #[test]
    fn unvalidated_phase_plans_are_refused_with_validation_text() {
        let cases: [(PhasePlan, &str); 7] = [
            (equal(0), "equal phase_count must be greater than 0"),
            (equal(-1), "equal phase_count must be greater than 0"),
            (
                pct(&[]),
                "percentage phase policy must include at least one phase",
            ),
            (
                pct(&[0, 100]),
                "percentage phase percentages must be between 1 and 100",
            ),
            (
                pct(&[50, 40]),
                "percentage phase percentages must sum to 100",
            ),
            (
                count(&[]),
                "count phase policy must include at least one phase",
            ),
            (count(&[2, 0]), "count phase counts must be greater than 0"),
        ];
        for (plan, message) in cases {
            assert_eq!(phase_sizes(10, &plan).unwrap_err().to_string(), message);
        }
    }

    // ---- plan_targets ---------------------------------------------------

    #[test]
    fn plan_assigns_sequence_and_phase_indexes() {
        let candidates: Vec<_> = (1..=10).map(compute_entry).collect();
        let plan = plan_targets(
            candidates,
            &selector(100, "selector-seed"),
            &random("ordering-seed"),
            &equal(3),
        )
        .unwrap();
        let expected: [(u32, i32); 10] = [
            (7, 0),
            (9, 0),
            (4, 0),
            (3, 0),
            (10, 1),
            (6, 1),
            (1, 1),
            (5, 2),
            (2, 2),
            (8, 2),
        ];
        assert_eq!(plan.targets.len(), 10);
        for (seq, (target, (n, phase))) in plan.targets.iter().zip(expected).enumerate() {
            assert_eq!(target.rack_id, rack(n));
            assert_eq!(target.sequence_index, seq as i32);
            assert_eq!(target.phase_index, phase);
            assert_eq!(
                target.components_by_type,
                set(&[(ComponentType::Compute, &[u128::from(n)])])
            );
        }
        assert_eq!(plan.phase_sizes, [4, 3, 3]);
        assert_eq!(plan.candidate_count, 10);
        assert_eq!(plan.total_phases(), 3);
    }

    #[test]
    fn plan_of_three_racks_in_two_equal_phases() {
        let candidates: Vec<_> = (1..=3).map(compute_entry).collect();
        let plan = plan_targets(
            candidates,
            &selector(100, "selector-seed"),
            &random("ordering-seed"),
            &equal(2),
        )
        .unwrap();
        let phases: Vec<i32> = plan.targets.iter().map(|t| t.phase_index).collect();
        assert_eq!(phases, [0, 0, 1]);
        let order: Vec<Uuid> = plan.targets.iter().map(|t| t.rack_id).collect();
        assert_eq!(nums(&order), [3, 1, 2]);
        assert_eq!(plan.total_phases(), 2);
    }

    #[test]
    fn plan_orders_the_selected_subset_by_the_ordering_seed() {
        // 25% with selector-seed picks {4,2,3}; ordering-seed orders 1..10 as
        // 7,9,4,3,10,6,1,5,2,8, so the subset comes out 4,3,2.
        let candidates: Vec<_> = (1..=10).map(compute_entry).collect();
        let plan = plan_targets(
            candidates,
            &selector(25, "selector-seed"),
            &random("ordering-seed"),
            &equal(1),
        )
        .unwrap();
        let order: Vec<Uuid> = plan.targets.iter().map(|t| t.rack_id).collect();
        assert_eq!(nums(&order), [4, 3, 2]);
        assert_eq!(plan.candidate_count, 10);
        assert_eq!(plan.phase_sizes, [3]);
        assert_eq!(plan.total_phases(), 1);
    }

    #[test]
    fn plan_freezes_sorted_component_sets_and_merges_stray_duplicates() {
        let candidates = vec![
            entry(rack(1), &[(ComponentType::Compute, &[3, 1, 2])]),
            entry(rack(1), &[(ComponentType::NvSwitch, &[9])]),
        ];
        let plan = plan_targets(candidates, &selector(100, "s"), &random("o"), &equal(1)).unwrap();
        assert_eq!(plan.targets.len(), 1);
        assert_eq!(plan.candidate_count, 1);
        assert_eq!(
            plan.targets[0].components_by_type,
            set(&[
                (ComponentType::Compute, &[1, 2, 3]),
                (ComponentType::NvSwitch, &[9])
            ])
        );
    }

    #[test]
    fn empty_candidates_give_an_empty_plan_without_checking_options() {
        let plan = plan_targets(
            vec![],
            &selector(0, ""),
            &OrderingPolicy::PhysicalLocation {
                strategy: LocationStrategy::RowByRow,
            },
            &equal(0),
        )
        .unwrap();
        assert!(plan.is_empty());
        assert_eq!(plan.total_phases(), 0);
        assert_eq!(plan.candidate_count, 0);
        assert!(plan.phase_sizes.is_empty());
    }

    #[test]
    fn plan_rejects_physical_location_ordering() {
        let err = plan_targets(
            vec![compute_entry(1)],
            &selector(100, "s"),
            &OrderingPolicy::PhysicalLocation {
                strategy: LocationStrategy::OnePerRowRoundRobin,
            },
            &equal(1),
        )
        .unwrap_err();
        assert_eq!(err, PlanError::PhysicalLocationUnsupported);
        assert_eq!(
            err.to_string(),
            "physical_location ordering is not supported yet"
        );
    }

    #[test]
    fn plan_surfaces_phase_errors() {
        let candidates: Vec<_> = (1..=2).map(compute_entry).collect();
        let err = plan_targets(
            candidates.clone(),
            &selector(100, "s"),
            &random("o"),
            &equal(10),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), zero_phase_message("equal", 2, 2));
        let err =
            plan_targets(candidates, &selector(100, "s"), &random("o"), &count(&[3])).unwrap_err();
        assert_eq!(err, PlanError::CountOverflow);
    }

    #[test]
    fn plan_rejects_an_unvalidated_percentage() {
        for p in [0, 101] {
            assert_eq!(
                plan_targets(
                    vec![compute_entry(1)],
                    &selector(p, "s"),
                    &random("o"),
                    &equal(1)
                )
                .unwrap_err()
                .to_string(),
                "percentage selector must be between 1 and 100"
            );
        }
    }

    // ---- §2.1 step 3 normalisation -------------------------------------

    #[test]
    fn nil_rack_id_is_rejected_with_its_index() {
        let err = normalize_candidates(vec![
            compute_entry(1),
            entry(Uuid::nil(), &[(ComponentType::Compute, &[5])]),
        ])
        .unwrap_err();
        assert_eq!(err, PlanError::MissingRackId(1));
        assert_eq!(err.to_string(), "targets[1].rack_id is required");
    }

    #[test]
    fn invalid_component_sets_report_the_component_set_text() {
        let err = normalize_candidates(vec![CandidateEntry {
            rack_id: rack(1),
            components: ComponentsByType::new(),
        }])
        .unwrap_err();
        assert_eq!(err.to_string(), "Non-empty ComponentsByType is required");
        let err = normalize_candidates(vec![entry(
            rack(1),
            &[(ComponentType::Compute, &[4]), (ComponentType::Cdu, &[4])],
        )])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("component {} appears under both CDU and Compute", comp(4))
        );
    }

    #[test]
    fn entries_of_one_rack_merge_into_the_first_occurrence() {
        let out = normalize_candidates(vec![
            entry(rack(2), &[(ComponentType::Compute, &[7, 5, 7])]),
            entry(rack(1), &[(ComponentType::PowerShelf, &[8])]),
            entry(rack(2), &[(ComponentType::NvSwitch, &[6])]),
            entry(rack(2), &[(ComponentType::Compute, &[4, 5])]),
        ])
        .unwrap();
        assert_eq!(
            out,
            vec![
                entry(
                    rack(2),
                    &[
                        (ComponentType::Compute, &[4, 5, 7]),
                        (ComponentType::NvSwitch, &[6])
                    ]
                ),
                entry(rack(1), &[(ComponentType::PowerShelf, &[8])]),
            ]
        );
    }

    #[test]
    fn single_entries_come_out_sorted_and_deduplicated() {
        let out = normalize_candidates(vec![entry(
            rack(1),
            &[(ComponentType::Compute, &[3, 1, 3])],
        )])
        .unwrap();
        assert_eq!(
            out,
            vec![entry(rack(1), &[(ComponentType::Compute, &[1, 3])])]
        );
    }

    #[test]
    fn merging_a_component_under_two_types_fails() {
        let err = normalize_candidates(vec![
            entry(rack(1), &[(ComponentType::Compute, &[4])]),
            entry(rack(1), &[(ComponentType::NvSwitch, &[4])]),
        ])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "components_by_type component {} appears under both Compute and NVSwitch",
                comp(4)
            )
        );
    }

    // ---- §2.1 step 5 exclusions ----------------------------------------

    #[test]
    fn exclusions_drop_emptied_racks_and_keep_partial_ones() {
        let candidates = vec![
            entry(
                rack(1),
                &[
                    (ComponentType::Compute, &[1, 2]),
                    (ComponentType::NvSwitch, &[3]),
                ],
            ),
            entry(rack(2), &[(ComponentType::Compute, &[4])]),
            entry(rack(3), &[(ComponentType::Compute, &[5])]),
        ];
        let excluded = vec![
            // rack 1 excluded by two prior runs, partly each
            entry(rack(1), &[(ComponentType::Compute, &[1])]),
            entry(rack(1), &[(ComponentType::NvSwitch, &[3])]),
            // rack 2 fully excluded
            entry(rack(2), &[(ComponentType::Compute, &[4])]),
            // per type: id 5 as a PowerShelf does not exclude Compute 5
            entry(rack(3), &[(ComponentType::PowerShelf, &[5])]),
            // a rack outside the scope changes nothing
            entry(rack(9), &[(ComponentType::Compute, &[9])]),
        ];
        let out = subtract_exclusions(candidates, &excluded);
        assert_eq!(
            out,
            vec![
                entry(rack(1), &[(ComponentType::Compute, &[2])]),
                entry(rack(3), &[(ComponentType::Compute, &[5])]),
            ]
        );
    }

    #[test]
    fn full_exclusion_empties_the_scope() {
        let candidates: Vec<_> = (1..=3).map(compute_entry).collect();
        assert!(subtract_exclusions(candidates.clone(), &candidates).is_empty());
        assert_eq!(subtract_exclusions(candidates.clone(), &[]), candidates);
    }

    // ---- §2.4 candidate limit ------------------------------------------

    #[test]
    fn candidate_limit_boundaries() {
        assert_eq!(DEFAULT_MAX_CANDIDATE_TARGETS, 100);
        assert!(check_candidate_limit(100, DEFAULT_MAX_CANDIDATE_TARGETS).is_ok());
        let err = check_candidate_limit(101, DEFAULT_MAX_CANDIDATE_TARGETS).unwrap_err();
        assert_eq!(err, PlanError::CandidateLimit { limit: 100 });
        assert_eq!(
            err.to_string(),
            "operation run candidate scope exceeds target limit 100"
        );
        assert!(check_candidate_limit(1_000_000, 0).is_ok());
        assert!(check_candidate_limit(2, 1).is_err());
        assert!(check_candidate_limit(0, 1).is_ok());
    }

    // ---- properties -------------------------------------------------------

    fn unique_ids(max: usize) -> impl Strategy<Value = Vec<Uuid>> {
        proptest::collection::hash_set(any::<u128>(), 0..max)
            .prop_map(|s| s.into_iter().map(Uuid::from_u128).collect())
    }

    /// Percentages summing to 100: cut points in 1..100 split 0..100.
    fn percentage_plan() -> impl Strategy<Value = Vec<i32>> {
        proptest::collection::btree_set(1i32..100, 0..8).prop_map(|cuts| {
            let mut bounds: Vec<i32> = vec![0];
            bounds.extend(cuts);
            bounds.push(100);
            bounds.windows(2).map(|w| w[1] - w[0]).collect()
        })
    }

    fn ceil_div(a: u128, b: u128) -> u128 {
        a.div_ceil(b)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn selection_size_subset_and_determinism(
            ids in unique_ids(60),
            p in 1i32..=100,
            seed in "[a-z0-9-]{0,12}",
        ) {
            let picked = select_percentage(&seed, &ids, p);
            // The reference formula, written out: (n·p + 99) / 100.
            #[allow(clippy::manual_div_ceil)]
            let expected = (ids.len() as u128 * p as u128 + 99) / 100;
            prop_assert_eq!(picked.len() as u128, expected);
            prop_assert!(picked.iter().all(|id| ids.contains(id)));
            let mut distinct = picked.clone();
            distinct.sort();
            distinct.dedup();
            prop_assert_eq!(distinct.len(), picked.len());
            prop_assert_eq!(&picked, &select_percentage(&seed, &ids, p));
        }

        #[test]
        fn selection_ignores_input_order(
            (ids, shuffled) in unique_ids(40)
                .prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle())),
            p in 1i32..=100,
            seed in "[a-z]{1,8}",
        ) {
            prop_assert_eq!(seeded_order(&seed, &ids), seeded_order(&seed, &shuffled));
            prop_assert_eq!(
                select_percentage(&seed, &ids, p),
                select_percentage(&seed, &shuffled, p)
            );
        }

        #[test]
        fn selection_is_monotone_and_complete(
            ids in unique_ids(40),
            p in 1i32..100,
            seed in "[a-z]{1,8}",
        ) {
            let smaller = select_percentage(&seed, &ids, p);
            let larger = select_percentage(&seed, &ids, p + 1);
            prop_assert!(larger.starts_with(&smaller));
            let all = select_percentage(&seed, &ids, 100);
            prop_assert_eq!(all.len(), ids.len());
            prop_assert_eq!(all, seeded_order(&seed, &ids));
        }

        #[test]
        fn equal_phases_follow_cumulative_ceilings(n in 0usize..200, k in 1i32..250) {
            match phase_sizes(n, &equal(k)) {
                Ok(sizes) => {
                    prop_assert_eq!(sizes.len(), k as usize);
                    prop_assert_eq!(sizes.iter().sum::<usize>(), n);
                    prop_assert!(sizes.iter().all(|s| *s > 0));
                    let mut end = 0usize;
                    for (i, size) in sizes.iter().enumerate() {
                        end += size;
                        let expected = ceil_div(n as u128 * (i as u128 + 1), k as u128);
                        prop_assert_eq!(end as u128, expected);
                    }
                }
                Err(PlanError::ZeroTargetPhase { kind, selected, .. }) => {
                    prop_assert_eq!(kind, "equal");
                    prop_assert_eq!(selected, n);
                    prop_assert!(k as usize > n);
                }
                Err(other) => prop_assert!(false, "unexpected error {other}"),
            }
        }

        #[test]
        fn percentage_phases_follow_cumulative_ceilings(
            n in 0usize..200,
            percentages in percentage_plan(),
        ) {
            match phase_sizes(n, &pct(&percentages)) {
                Ok(sizes) => {
                    prop_assert_eq!(sizes.len(), percentages.len());
                    prop_assert_eq!(sizes.iter().sum::<usize>(), n);
                    prop_assert!(sizes.iter().all(|s| *s > 0));
                    let (mut end, mut cumulative) = (0usize, 0u128);
                    for (size, p) in sizes.iter().zip(&percentages) {
                        end += size;
                        cumulative += *p as u128;
                        prop_assert_eq!(end as u128, ceil_div(n as u128 * cumulative, 100));
                    }
                }
                Err(PlanError::ZeroTargetPhase { kind, selected, phase }) => {
                    prop_assert_eq!(kind, "percentage");
                    prop_assert_eq!(selected, n);
                    prop_assert!(phase >= 1 && phase <= percentages.len());
                }
                Err(other) => prop_assert!(false, "unexpected error {other}"),
            }
        }

        #[test]
        fn count_phases_sum_to_n_or_overflow(
            n in 0usize..100,
            counts in proptest::collection::vec(1i32..20, 1..8),
        ) {
            let total: usize = counts.iter().map(|c| *c as usize).sum();
            match phase_sizes(n, &count(&counts)) {
                Ok(sizes) => {
                    prop_assert!(total <= n);
                    prop_assert_eq!(sizes.iter().sum::<usize>(), n);
                    prop_assert!(sizes.iter().all(|s| *s > 0));
                    let expected: Vec<usize> = counts.iter().map(|c| *c as usize).collect();
                    prop_assert_eq!(&sizes[..counts.len()], &expected[..]);
                    prop_assert_eq!(sizes.len(), counts.len() + usize::from(total < n));
                }
                Err(err) => {
                    prop_assert_eq!(err, PlanError::CountOverflow);
                    prop_assert!(total > n);
                }
            }
        }

        #[test]
        fn planned_targets_are_sequenced_and_phased(
            ids in unique_ids(30),
            p in 1i32..=100,
            k in 1i32..6,
        ) {
            let candidates: Vec<CandidateEntry> = ids
                .iter()
                .enumerate()
                .map(|(i, id)| {
                    let mut components = ComponentsByType::new();
                    components.push(ComponentType::Compute, Uuid::from_u128(i as u128 + 1));
                    CandidateEntry { rack_id: *id, components }
                })
                .collect();
            match plan_targets(candidates, &selector(p, "sel"), &random("ord"), &equal(k)) {
                Ok(plan) => {
                    let expected = select_percentage("sel", &ids, p);
                    prop_assert_eq!(plan.targets.len(), expected.len());
                    prop_assert_eq!(plan.candidate_count, ids.len());
                    let order: Vec<Uuid> = plan.targets.iter().map(|t| t.rack_id).collect();
                    prop_assert_eq!(order, seeded_order("ord", &expected));
                    for (i, t) in plan.targets.iter().enumerate() {
                        prop_assert_eq!(t.sequence_index as usize, i);
                    }
                    prop_assert!(plan.targets.windows(2).all(|w| w[0].phase_index <= w[1].phase_index));
                    prop_assert!(plan.phase_sizes.iter().all(|s| *s > 0));
                    prop_assert_eq!(plan.total_phases() as usize, plan.phase_sizes.len());
                }
                Err(PlanError::ZeroTargetPhase { selected, .. }) => {
                    prop_assert!(k as usize > selected);
                }
                Err(other) => prop_assert!(false, "unexpected error {other}"),
            }
        }
    }
}
