//! Claiming targets under the concurrency quota (§3.6).

use super::*;

/// How a current-phase target stands with respect to claiming (§3.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimClass {
    /// Consumes quota: submitted with a task, or claimed with a live lease.
    Active,
    /// May be claimed now: pending; blocked or claimed whose `retry_after`
    /// is absent or due (expired backoff / lease); legacy submitted without
    /// a task id.
    Candidate,
    /// Blocked with a backoff not yet due; counted only for the message.
    WaitingBlocked,
    /// Terminal.
    Done,
}

pub fn classify(target: &OperationRunTarget, now: DateTime<Utc>) -> ClaimClass {
    let due = target.retry_after.is_none_or(|at| at <= now);
    match target.status {
        TargetStatus::Submitted if target.task_id.is_some() => ClaimClass::Active,
        TargetStatus::Submitted | TargetStatus::Pending => ClaimClass::Candidate,
        // A lease is live only while strictly in the future, so the instant
        // it expires the row is both not active and claimable.
        TargetStatus::Claimed if !due => ClaimClass::Active,
        TargetStatus::Claimed => ClaimClass::Candidate,
        TargetStatus::Blocked if due => ClaimClass::Candidate,
        TargetStatus::Blocked => ClaimClass::WaitingBlocked,
        TargetStatus::Completed
        | TargetStatus::Failed
        | TargetStatus::Terminated
        | TargetStatus::Skipped => ClaimClass::Done,
    }
}

/// Targets consuming quota right now.
pub fn active_count(targets: &[OperationRunTarget], now: DateTime<Utc>) -> usize {
    targets
        .iter()
        .filter(|t| classify(t, now) == ClaimClass::Active)
        .count()
}

/// Claims one target (§3.6): status claimed, task id cleared, lease until
/// `now + lease`. D1: `retry_state` is deliberately kept (the reference
/// clears it, which is why its backoff never grows), so a re-block after
/// this claim continues the streak.
pub fn claim_target(target: &mut OperationRunTarget, now: DateTime<Utc>, lease: Duration) {
    target.status = TargetStatus::Claimed;
    target.task_id = None;
    target.message = messages::CLAIMED.into();
    target.retry_after = Some(add(now, lease));
    target.updated_at = now;
}

/// Marks a target failed with an error text (child request could not be
/// built, hard submission error). Retry bookkeeping goes with it: the
/// target is terminal.
pub fn fail_target(target: &mut OperationRunTarget, error: &str, now: DateTime<Utc>) {
    target.status = TargetStatus::Failed;
    target.task_id = None;
    target.message = error.to_string();
    target.retry_after = None;
    target.retry_state = None;
    target.updated_at = now;
}

/// The run message after a claim step with free quota (§3.6): `None` when
/// there is nothing to say (the run message is then left as it was).
pub fn claim_message(claimed: usize, waiting_blocked: usize) -> Option<String> {
    let mut parts = Vec::new();
    match claimed {
        0 => {}
        1 => parts.push("submitted 1 operation run target".to_string()),
        n => parts.push(format!("submitted {n} operation run targets")),
    }
    match waiting_blocked {
        0 => {}
        1 => parts.push("1 target waiting on rack conflicts".to_string()),
        n => parts.push(format!("{n} targets waiting on rack conflicts")),
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// What a claim step did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimOutcome<R> {
    /// Claimed targets (indexes into the slice, sequence order) with the
    /// child request built for each, to submit after commit.
    pub claimed: Vec<(usize, R)>,
    /// Targets failed because their child request could not be built.
    pub failed: Vec<usize>,
    /// Quota consumers before claiming.
    pub active: usize,
    /// Blocked targets whose backoff is not due.
    pub waiting_blocked: usize,
    /// The run's new status message, if the step sets one.
    pub run_message: Option<String>,
}

impl<R> ClaimOutcome<R> {
    /// Indexes of every target row the step changed (to persist).
    pub fn changed(&self) -> Vec<usize> {
        let mut all: Vec<usize> = self.claimed.iter().map(|(i, _)| *i).collect();
        all.extend(&self.failed);
        all.sort_unstable();
        all
    }
}

/// The claim step of decision #11 (§3.6) over the locked current-phase
/// rows. Candidates are taken in sequence order; `build` makes the child
/// request for one (§3.7) — a build error fails that target and does not
/// use a slot. Stops once `max_concurrent_targets − active` are claimed.
pub fn claim_targets<R>(
    targets: &mut [OperationRunTarget],
    max_concurrent_targets: i32,
    now: DateTime<Utc>,
    lease: Duration,
    mut build: impl FnMut(&OperationRunTarget) -> Result<R, String>,
) -> ClaimOutcome<R> {
    let active = active_count(targets, now);
    let waiting_blocked = targets
        .iter()
        .filter(|t| classify(t, now) == ClaimClass::WaitingBlocked)
        .count();
    let available = i64::from(max_concurrent_targets) - i64::try_from(active).unwrap_or(i64::MAX);
    let mut outcome = ClaimOutcome {
        claimed: Vec::new(),
        failed: Vec::new(),
        active,
        waiting_blocked,
        run_message: None,
    };
    if available <= 0 {
        outcome.run_message = Some(messages::WAITING_FOR_QUOTA.into());
        return outcome;
    }
    let available = usize::try_from(available).unwrap_or(usize::MAX);
    let mut order: Vec<usize> = (0..targets.len())
        .filter(|&i| classify(&targets[i], now) == ClaimClass::Candidate)
        .collect();
    order.sort_by_key(|&i| targets[i].sequence_index);
    for i in order {
        if outcome.claimed.len() >= available {
            break;
        }
        match build(&targets[i]) {
            Ok(request) => {
                claim_target(&mut targets[i], now, lease);
                outcome.claimed.push((i, request));
            }
            Err(error) => {
                fail_target(&mut targets[i], &error, now);
                outcome.failed.push(i);
            }
        }
    }
    outcome.run_message = claim_message(outcome.claimed.len(), waiting_blocked);
    outcome
}

/// [`claim_targets`] when every child request builds: claims up to the free
/// slots and returns the claimed indexes in sequence order.
pub fn plan_claims(
    targets: &mut [OperationRunTarget],
    max_concurrent_targets: i32,
    now: DateTime<Utc>,
    lease: Duration,
) -> Vec<usize> {
    claim_targets(targets, max_concurrent_targets, now, lease, |_| {
        Ok::<(), String>(())
    })
    .claimed
    .into_iter()
    .map(|(i, ())| i)
    .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::dispatch::test_support::*;

    #[test]
    fn classification_of_every_status() {
        let now = at(100);
        let with = |status: TargetStatus, task: bool, after: Option<i64>| {
            let mut t = target(0, status);
            t.task_id = task.then(|| id(5));
            t.retry_after = after.map(at);
            classify(&t, now)
        };
        use ClaimClass::*;
        assert_eq!(with(T::Pending, false, None), Candidate);
        assert_eq!(with(T::Submitted, true, None), Active);
        assert_eq!(with(T::Submitted, false, None), Candidate);
        assert_eq!(with(T::Claimed, false, Some(101)), Active);
        assert_eq!(with(T::Claimed, false, Some(100)), Candidate);
        assert_eq!(with(T::Claimed, false, Some(99)), Candidate);
        assert_eq!(with(T::Claimed, false, None), Candidate);
        assert_eq!(with(T::Blocked, false, Some(101)), WaitingBlocked);
        assert_eq!(with(T::Blocked, false, Some(100)), Candidate);
        assert_eq!(with(T::Blocked, false, None), Candidate);
        for s in [T::Completed, T::Failed, T::Terminated, T::Skipped] {
            assert_eq!(with(s, true, None), Done);
        }
    }

    #[test]
    fn claims_fill_free_slots_in_sequence_order() {
        let now = at(100);
        let mut rows = targets(&[
            T::Completed, // 0
            T::Submitted, // 1 active
            T::Claimed,   // 2 active (lease until 130)
            T::Pending,   // 3
            T::Pending,   // 4
            T::Pending,   // 5
        ]);
        rows[2].retry_after = Some(at(130));
        // Scrambled input order: sequence decides, not position.
        rows.reverse();
        let outcome = claim_targets(&mut rows, 4, now, LEASE, |t| Ok::<_, String>(t.id));
        assert_eq!(outcome.active, 2);
        let claimed: Vec<i32> = outcome
            .claimed
            .iter()
            .map(|(i, req)| {
                assert_eq!(*req, rows[*i].id);
                rows[*i].sequence_index
            })
            .collect();
        assert_eq!(claimed, vec![3, 4]);
        assert_eq!(
            outcome.run_message.as_deref(),
            Some("submitted 2 operation run targets")
        );
        let fifth = rows.iter().find(|t| t.sequence_index == 5).unwrap();
        assert_eq!(fifth.status, T::Pending);
        assert_eq!(active_count(&rows, now), 4);
        assert_eq!(outcome.changed(), {
            let mut v: Vec<usize> = outcome.claimed.iter().map(|(i, _)| *i).collect();
            v.sort_unstable();
            v
        });
    }

    #[test]
    fn claim_sets_lease_and_keeps_retry_state() {
        let now = at(100);
        let mut rows = vec![blocked_since(0, t0())];
        rows[0].retry_after = Some(now);
        rows[0].message = "rack busy".into();
        let state = rows[0].retry_state.clone();
        assert_eq!(plan_claims(&mut rows, 1, now, LEASE), vec![0]);
        let t = &rows[0];
        assert_eq!(t.status, T::Claimed);
        assert_eq!(t.task_id, None);
        assert_eq!(t.message, "claimed for submission");
        assert_eq!(t.retry_after, Some(at(130)));
        assert_eq!(t.retry_state, state, "D1: claims keep the streak");
        assert_eq!(t.updated_at, now);
    }

    #[test]
    fn expired_leases_are_reclaimed_and_unexpired_ones_hold_quota() {
        let mut rows = targets(&[T::Claimed, T::Claimed, T::Pending]);
        rows[0].retry_after = Some(at(100)); // expires exactly now
        rows[1].retry_after = Some(at(101)); // still held
        assert_eq!(plan_claims(&mut rows, 2, at(100), LEASE), vec![0]);
        assert_eq!(rows[0].retry_after, Some(at(130)));
        assert_eq!(rows[2].status, T::Pending);
        // Nothing free now: both leases live.
        let out = claim_targets(&mut rows, 2, at(100), LEASE, |_| Ok::<_, String>(()));
        assert!(out.claimed.is_empty());
        assert_eq!(
            out.run_message.as_deref(),
            Some("waiting for active targets quota")
        );
    }

    #[test]
    fn blocked_targets_wait_for_their_backoff() {
        let now = at(100);
        let mut rows = vec![
            blocked_since(0, t0()),
            blocked_since(1, t0()),
            target(2, T::Pending),
        ];
        rows[0].retry_after = Some(at(101)); // not due
        rows[1].retry_after = Some(at(100)); // due
        let out = claim_targets(&mut rows, 5, now, LEASE, |_| Ok::<_, String>(()));
        let claimed: Vec<usize> = out.claimed.iter().map(|(i, _)| *i).collect();
        assert_eq!(claimed, vec![1, 2]);
        assert_eq!(out.waiting_blocked, 1);
        assert_eq!(rows[0].status, T::Blocked);
        assert_eq!(
            out.run_message.as_deref(),
            Some("submitted 2 operation run targets; 1 target waiting on rack conflicts")
        );
    }

    #[test]
    fn legacy_submitted_without_task_is_reclaimed() {
        let mut rows = targets(&[T::Submitted]);
        rows[0].task_id = None;
        assert_eq!(plan_claims(&mut rows, 1, t0(), LEASE), vec![0]);
        assert_eq!(rows[0].status, T::Claimed);
    }

    #[test]
    fn quota_exhausted_claims_nothing_and_says_so() {
        for max in [0, 1, 2] {
            let mut rows = targets(&[T::Submitted, T::Submitted, T::Pending]);
            let before = rows.clone();
            let out = claim_targets(&mut rows, max, t0(), LEASE, |_| Ok::<_, String>(()));
            assert!(out.claimed.is_empty() && out.failed.is_empty());
            assert_eq!(
                out.run_message.as_deref(),
                Some("waiting for active targets quota")
            );
            assert_eq!(rows, before);
        }
    }

    #[test]
    fn build_failures_fail_the_target_without_using_a_slot() {
        let mut rows = targets(&[T::Pending, T::Pending, T::Pending, T::Pending]);
        let out = claim_targets(&mut rows, 2, t0(), LEASE, |t| {
            if t.sequence_index == 1 {
                Err("no components to target".to_string())
            } else {
                Ok(t.sequence_index)
            }
        });
        assert_eq!(out.claimed, vec![(0, 0), (2, 2)]);
        assert_eq!(out.failed, vec![1]);
        assert_eq!(out.changed(), vec![0, 1, 2]);
        assert_eq!(rows[1].status, T::Failed);
        assert_eq!(rows[1].message, "no components to target");
        assert_eq!(rows[3].status, T::Pending);
        assert_eq!(
            out.run_message.as_deref(),
            Some("submitted 2 operation run targets")
        );
    }

    #[test]
    fn claim_messages() {
        assert_eq!(claim_message(0, 0), None);
        assert_eq!(
            claim_message(1, 0).as_deref(),
            Some("submitted 1 operation run target")
        );
        assert_eq!(
            claim_message(3, 0).as_deref(),
            Some("submitted 3 operation run targets")
        );
        assert_eq!(
            claim_message(0, 1).as_deref(),
            Some("1 target waiting on rack conflicts")
        );
        assert_eq!(
            claim_message(0, 2).as_deref(),
            Some("2 targets waiting on rack conflicts")
        );
        assert_eq!(
            claim_message(1, 1).as_deref(),
            Some("submitted 1 operation run target; 1 target waiting on rack conflicts")
        );
        // Free quota but nothing to claim and nothing waiting: message kept.
        let mut rows = targets(&[T::Completed]);
        let out = claim_targets(&mut rows, 1, t0(), LEASE, |_| Ok::<_, String>(()));
        assert_eq!(out.run_message, None);
    }

    fn any_target() -> impl Strategy<Value = (u8, bool, Option<i64>)> {
        (0u8..8, any::<bool>(), proptest::option::of(-60i64..60))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn quota_is_never_exceeded(
            rows in proptest::collection::vec(any_target(), 0..24),
            max in -1i32..8,
            failing in proptest::collection::vec(any::<bool>(), 24),
        ) {
            let now = at(1000);
            let mut targets: Vec<OperationRunTarget> = rows
                .iter()
                .enumerate()
                .map(|(i, (s, task, after))| {
                    let mut t = target(i as i32, T::ALL[*s as usize]);
                    t.task_id = task.then(|| id(7000 + i as u128));
                    t.retry_after = after.map(|d| now + TimeDelta::seconds(d));
                    t
                })
                .collect();
            let before = targets.clone();
            let active_before = active_count(&targets, now);
            let out = claim_targets(&mut targets, max, now, LEASE, |t| {
                if failing[t.sequence_index as usize] { Err("bad".to_string()) } else { Ok(()) }
            });
            let free = (i64::from(max) - active_before as i64).max(0) as usize;
            prop_assert!(out.claimed.len() <= free);
            let active_after = active_count(&targets, now);
            prop_assert_eq!(active_after, active_before + out.claimed.len());
            if active_before <= max.max(0) as usize {
                prop_assert!(active_after <= max.max(0) as usize);
            }
            // Only candidates were touched, in sequence order; any candidate
            // left unclaimed means the quota is full.
            let mut touched: Vec<usize> = out.changed();
            touched.dedup();
            for &i in &touched {
                prop_assert_eq!(classify(&before[i], now), ClaimClass::Candidate);
            }
            let claimed: Vec<usize> = out.claimed.iter().map(|(i, _)| *i).collect();
            prop_assert!(claimed.windows(2).all(|w| w[0] < w[1]));
            let untouched_candidates = (0..before.len())
                .filter(|i| !touched.contains(i))
                .filter(|&i| classify(&before[i], now) == ClaimClass::Candidate)
                .count();
            if untouched_candidates > 0 {
                prop_assert!(free == 0 || out.claimed.len() == free);
            }
            for (i, t) in targets.iter().enumerate() {
                if !touched.contains(&i) {
                    prop_assert_eq!(t, &before[i]);
                }
            }
        }
    }
}
