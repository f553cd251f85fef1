//! What a submission outcome does to a target, including the conflict
//! backoff that keeps its retry state across claims (§3.7, §3.9, D1), and
//! when time alone next changes a decision.

use super::*;

/// The next backoff in whole seconds: the initial delay on the first block
/// of a streak, else the previous delay doubled, capped at the max (§3.9).
/// Delays are floored at 1 s because a sub-second policy truncates to 0 s,
/// and 0 doubled never grows.
pub fn next_retry_delay_secs(previous: Option<&RetryState>, policy: &ConflictPolicy) -> i64 {
    let ConflictPolicy::Retry {
        initial_retry_delay,
        max_retry_delay,
        ..
    } = policy;
    let secs = |d: &Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX).max(1);
    let (initial, max) = (secs(initial_retry_delay), secs(max_retry_delay));
    match previous.map(|s| s.last_retry_delay_seconds) {
        // Missing or nonsensical state counts as a first block (§5.6).
        Some(last) if last > 0 => last.saturating_mul(2).min(max),
        _ => initial,
    }
}

/// Whether a streak that began at `blocked_since` has lasted the policy's
/// retry timeout (inclusive, §3.5 #7).
pub fn conflict_timed_out(
    blocked_since: DateTime<Utc>,
    policy: &ConflictPolicy,
    now: DateTime<Utc>,
) -> bool {
    let ConflictPolicy::Retry { retry_timeout, .. } = policy;
    TimeDelta::from_std(*retry_timeout)
        .is_ok_and(|timeout| now.signed_duration_since(blocked_since) >= timeout)
}

/// The earliest instant after `now` at which time alone changes what a pass
/// would decide for these current-phase targets: a blocked target's backoff
/// ends (it becomes claimable), its streak reaches `retry_timeout` (§3.5
/// #7), or a claim lease expires (§3.11). `None` when nothing is pending on
/// the clock.
///
/// Why (D2): events wake the dispatcher for state changes, but nothing
/// happens when a backoff simply runs out; without a timer a blocked target
/// was only retried — and a conflict timeout only noticed — at the next
/// safety-net poll (10 s by default, far later than a 1 s backoff). Instants
/// at or before `now` are ignored: such a target is due already and waits
/// for a free slot, which a task event announces, so it must not make the
/// loop spin.
pub fn next_due(
    targets: &[OperationRunTarget],
    policy: &ConflictPolicy,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let ConflictPolicy::Retry { retry_timeout, .. } = policy;
    let mut due: Option<DateTime<Utc>> = None;
    let mut consider = |at: DateTime<Utc>| {
        if at > now && due.is_none_or(|d| at < d) {
            due = Some(at);
        }
    };
    for target in targets {
        match target.status {
            TargetStatus::Blocked => {
                if let Some(at) = target.retry_after {
                    consider(at);
                }
                if let Some(state) = &target.retry_state {
                    consider(add(state.blocked_since, *retry_timeout));
                }
            }
            TargetStatus::Claimed => {
                if let Some(at) = target.retry_after {
                    consider(at);
                }
            }
            _ => {}
        }
    }
    due
}

/// What a rack conflict did to a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflictOutcome {
    pub delay: Duration,
    pub retry_after: DateTime<Utc>,
    pub retry_state: RetryState,
    /// The streak has already lasted `retry_timeout`: the next pass will
    /// pause the run (the run row is not locked after commit, so this only
    /// tells the engine to wake the dispatcher).
    pub timed_out: bool,
}

/// A submission was rejected by a rack conflict (§3.9 with D1): the target
/// is blocked with the error text, backing off from its *current* retry
/// state — which claiming kept — so the delay doubles across claims and
/// `blocked_since` stays the first conflict of the streak.
pub fn on_conflict(
    target: &mut OperationRunTarget,
    policy: &ConflictPolicy,
    error: &str,
    now: DateTime<Utc>,
) -> ConflictOutcome {
    let previous = target.retry_state.as_ref();
    let delay_secs = next_retry_delay_secs(previous, policy);
    let retry_state = RetryState {
        blocked_since: previous.map_or(now, |s| s.blocked_since),
        attempts: previous.map_or(0, |s| s.attempts.max(0)).saturating_add(1),
        last_retry_delay_seconds: delay_secs,
    };
    let delay = Duration::from_secs(u64::try_from(delay_secs).unwrap_or(1));
    let retry_after = add(now, delay);
    target.status = TargetStatus::Blocked;
    target.task_id = None;
    target.message = error.to_string();
    target.retry_after = Some(retry_after);
    target.retry_state = Some(retry_state.clone());
    target.updated_at = now;
    ConflictOutcome {
        delay,
        retry_after,
        timed_out: conflict_timed_out(retry_state.blocked_since, policy, now),
        retry_state,
    }
}

/// The child task was created (§3.7): the target is submitted with it and
/// its conflict streak is over (D1), so retry fields are cleared.
pub fn on_submitted(target: &mut OperationRunTarget, task_id: Uuid, now: DateTime<Utc>) {
    target.status = TargetStatus::Submitted;
    target.task_id = Some(task_id);
    target.message = messages::SUBMITTED.into();
    target.retry_after = None;
    target.retry_state = None;
    target.updated_at = now;
}

/// A submission error that is not a rack conflict: the target fails with
/// the error text (§3.7).
pub fn on_submit_failed(target: &mut OperationRunTarget, error: &str, now: DateTime<Utc>) {
    fail_target(target, error, now);
}

/// What the task manager answered to one submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitResult<'a> {
    /// Success, with the ids it returned (expected: exactly one, non-nil).
    Tasks(&'a [Uuid]),
    /// The task manager's rack-conflict error, with its text.
    Conflict(&'a str),
    /// Any other error, with its text.
    Error(&'a str),
    /// The database could not be reached, so whether the task was created
    /// is unknown. Not a failure of the target (decision: an outage loses
    /// nothing).
    Unavailable,
}

/// Where a submission left the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmitEffect {
    /// Submitted with an active task.
    Active(Uuid),
    Blocked(ConflictOutcome),
    Failed,
    /// Left claimed: once its lease expires it is claimed again and
    /// resubmitted under the same idempotency key, which returns the task
    /// if the lost submission had created it.
    Unknown,
}

impl SubmitEffect {
    /// A blocked or failed target frees its slot, which is what triggers
    /// the second attempt of a pass (§3.2 step 8); an unknown one still
    /// holds it with its claim.
    pub fn frees_slot(&self) -> bool {
        matches!(self, SubmitEffect::Blocked(_) | SubmitEffect::Failed)
    }
}

/// Applies one submission's result to its claimed target (§3.7).
pub fn on_submit_result(
    target: &mut OperationRunTarget,
    result: SubmitResult<'_>,
    policy: &ConflictPolicy,
    now: DateTime<Utc>,
) -> SubmitEffect {
    match result {
        SubmitResult::Tasks([id]) if !id.is_nil() => {
            on_submitted(target, *id, now);
            SubmitEffect::Active(*id)
        }
        SubmitResult::Tasks(_) => {
            fail_target(target, messages::NOT_EXACTLY_ONE_TASK, now);
            SubmitEffect::Failed
        }
        SubmitResult::Conflict(error) => {
            SubmitEffect::Blocked(on_conflict(target, policy, error, now))
        }
        SubmitResult::Error(error) => {
            fail_target(target, error, now);
            SubmitEffect::Failed
        }
        SubmitResult::Unavailable => SubmitEffect::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::test_support::*;

    // ---- §3.7 / §3.9 submission outcomes and backoff (D1) -------------------------

    /// Conflict → claim → conflict … with the dispatcher claiming as soon as
    /// each backoff is due.
    #[test]
    fn backoff_doubles_to_the_cap_across_claims() {
        let policy = retry(1, 8, 3600);
        let mut t = target(0, T::Pending);
        let mut now = t0();
        let mut delays = Vec::new();
        for attempt in 1..=5 {
            assert_eq!(
                plan_claims(std::slice::from_mut(&mut t), 1, now, LEASE),
                vec![0]
            );
            let out = on_conflict(&mut t, &policy, "rack has an active conflicting task", now);
            delays.push(out.delay.as_secs());
            assert_eq!(t.status, T::Blocked);
            assert_eq!(t.task_id, None);
            assert_eq!(t.message, "rack has an active conflicting task");
            assert_eq!(
                t.retry_after,
                Some(now + TimeDelta::seconds(out.delay.as_secs() as i64))
            );
            assert_eq!(out.retry_after, t.retry_after.unwrap());
            let state = t.retry_state.clone().unwrap();
            assert_eq!(state, out.retry_state);
            assert_eq!(
                state.blocked_since,
                t0(),
                "streak starts at the first conflict"
            );
            assert_eq!(state.attempts, attempt);
            assert_eq!(state.last_retry_delay_seconds, out.delay.as_secs() as i64);
            assert!(!out.timed_out);
            // Not claimable a moment before the backoff is due.
            let early = out.retry_after - TimeDelta::milliseconds(1);
            assert_eq!(classify(&t, early), ClaimClass::WaitingBlocked);
            now = out.retry_after;
        }
        assert_eq!(delays, vec![1, 2, 4, 8, 8]);
    }

    #[test]
    fn backoff_with_default_policy() {
        let policy = ConflictPolicy::default();
        let mut t = target(0, T::Claimed);
        let delays: Vec<u64> = (0..7)
            .map(|_| {
                on_conflict(&mut t, &policy, "conflict", t0())
                    .delay
                    .as_secs()
            })
            .collect();
        assert_eq!(delays, vec![30, 60, 120, 240, 300, 300, 300]);
    }

    #[test]
    fn a_successful_submission_ends_the_streak() {
        let policy = retry(1, 8, 3600);
        let mut t = target(0, T::Claimed);
        on_conflict(&mut t, &policy, "conflict", t0());
        on_conflict(&mut t, &policy, "conflict", at(1));
        assert_eq!(t.retry_state.as_ref().unwrap().attempts, 2);
        on_submitted(&mut t, id(42), at(5));
        assert_eq!(t.status, T::Submitted);
        assert_eq!(t.task_id, Some(id(42)));
        assert_eq!(t.message, "submitted");
        assert_eq!((t.retry_after, t.retry_state.clone()), (None, None));
        assert_eq!(t.updated_at, at(5));
        // A later conflict starts a new streak.
        let out = on_conflict(&mut t, &policy, "conflict", at(10));
        assert_eq!(out.delay, Duration::from_secs(1));
        assert_eq!(out.retry_state.blocked_since, at(10));
        assert_eq!(out.retry_state.attempts, 1);
    }

    #[test]
    fn streak_times_out_exactly_at_retry_timeout() {
        let policy = retry(30, 300, 600);
        let mut o = options(lenient(), false);
        o.conflict_policy = policy.clone();
        let mut rows = targets(&[T::Pending, T::Pending]);
        let mut now = t0();
        // Keep re-blocking target 0 whenever it is due.
        loop {
            let out = claim_targets(&mut rows, 1, now, LEASE, |_| Ok::<_, String>(()));
            if let Some((i, ())) = out.claimed.first() {
                let c = on_conflict(&mut rows[*i], &policy, "conflict", now);
                assert_eq!(c.timed_out, now - t0() >= TimeDelta::seconds(600));
            }
            now = rows[0].retry_after.unwrap();
            let s = PhaseSummary::new(0, 1, &rows, NONE);
            let d = decide(&running(0, 1), &s, ready(&o), now);
            if now - t0() >= TimeDelta::seconds(600) {
                assert_eq!(
                    d,
                    Decision::PauseConflictTimeout {
                        target_id: id(1000),
                        message: format!("target {} blocked by rack conflict for 10m0s", id(1000))
                    }
                );
                break;
            }
            assert!(matches!(d, Decision::Claim { .. }), "{now}");
        }
        // Backoff 30, 60, 120, 240 → blocked at 0, 30, 90, 210, due at 450,
        // then 300 → due at 750: the first pass at or after 600.
        assert_eq!(now, at(750));
        assert_eq!(rows[0].retry_state.as_ref().unwrap().attempts, 5);
        // Exactly at the timeout, directly.
        let s = PhaseSummary::new(0, 1, &rows, NONE);
        assert!(conflict_timeout(&s, &policy, at(599)).is_none());
        assert!(conflict_timeout(&s, &policy, at(600)).is_some());
        assert!(conflict_timed_out(t0(), &policy, at(600)));
        assert!(!conflict_timed_out(
            t0(),
            &policy,
            at(600) - TimeDelta::nanoseconds(1)
        ));
    }

    #[test]
    fn next_due_is_the_earliest_future_backoff_timeout_or_lease() {
        let policy = retry(1, 8, 5);
        let mut rows = targets(&[T::Pending, T::Submitted, T::Completed]);
        assert_eq!(next_due(&rows, &policy, t0()), None, "nothing on the clock");

        // A blocked target: its backoff end, or its streak's timeout if sooner.
        let mut blocked = target(3, T::Claimed);
        on_conflict(&mut blocked, &policy, "conflict", t0());
        rows.push(blocked);
        assert_eq!(next_due(&rows, &policy, t0()), Some(at(1)));
        rows[3].retry_after = Some(at(8));
        assert_eq!(next_due(&rows, &policy, t0()), Some(at(5)), "timeout first");
        // Instants not after `now` are ignored (due already: no spinning).
        assert_eq!(next_due(&rows, &policy, at(5)), Some(at(8)));
        assert_eq!(next_due(&rows, &policy, at(8)), None);

        // A live claim lease counts; an expired one does not.
        let mut claimed = target(4, T::Pending);
        claim_target(&mut claimed, t0(), Duration::from_secs(3));
        rows.push(claimed);
        assert_eq!(next_due(&rows, &policy, at(2)), Some(at(3)));
        assert_eq!(next_due(&rows, &policy, at(3)), Some(at(5)));
    }

    #[test]
    fn backoff_edge_cases() {
        // Sub-second policies still back off by whole, growing seconds.
        let sub = ConflictPolicy::Retry {
            retry_timeout: Duration::from_secs(60),
            initial_retry_delay: Duration::from_millis(200),
            max_retry_delay: Duration::from_millis(900),
        };
        assert_eq!(next_retry_delay_secs(None, &sub), 1);
        // Legacy state without a usable delay counts as the first block,
        // but keeps its start.
        let legacy = RetryState {
            blocked_since: t0(),
            attempts: 4,
            last_retry_delay_seconds: 0,
        };
        let policy = retry(5, 40, 3600);
        assert_eq!(next_retry_delay_secs(Some(&legacy), &policy), 5);
        let mut t = target(0, T::Claimed);
        t.retry_state = Some(legacy);
        let out = on_conflict(&mut t, &policy, "c", at(50));
        assert_eq!(out.retry_state.blocked_since, t0());
        assert_eq!(out.retry_state.attempts, 5);
        // A previous delay above a since-lowered cap is capped.
        let big = RetryState {
            blocked_since: t0(),
            attempts: 1,
            last_retry_delay_seconds: 1000,
        };
        assert_eq!(next_retry_delay_secs(Some(&big), &policy), 40);
        // The timed_out flag follows the streak, not this block.
        let policy = retry(5, 40, 60);
        let out = on_conflict(&mut t, &policy, "c", at(60));
        assert!(out.timed_out);
    }

    #[test]
    fn submission_results() {
        let policy = retry(1, 8, 60);
        let claimed = || {
            let mut t = target(0, T::Claimed);
            t.retry_after = Some(at(30));
            t
        };
        let mut t = claimed();
        let e = on_submit_result(&mut t, SubmitResult::Tasks(&[id(9)]), &policy, at(1));
        assert_eq!(e, SubmitEffect::Active(id(9)));
        assert!(!e.frees_slot());
        assert_eq!(
            (t.status, t.task_id, t.message.as_str()),
            (T::Submitted, Some(id(9)), "submitted")
        );
        assert_eq!(t.retry_after, None);

        for ids in [&[][..], &[id(1), id(2)][..], &[Uuid::nil()][..]] {
            let mut t = claimed();
            let e = on_submit_result(&mut t, SubmitResult::Tasks(ids), &policy, at(1));
            assert_eq!(e, SubmitEffect::Failed);
            assert!(e.frees_slot());
            assert_eq!(t.status, T::Failed);
            assert_eq!(t.message, "task submission did not return exactly one task");
            assert_eq!(t.task_id, None);
        }

        let mut t = claimed();
        let e = on_submit_result(&mut t, SubmitResult::Conflict("rack busy"), &policy, at(1));
        assert!(matches!(&e, SubmitEffect::Blocked(c) if c.delay == Duration::from_secs(1)));
        assert!(e.frees_slot());
        assert_eq!((t.status, t.message.as_str()), (T::Blocked, "rack busy"));

        let mut t = claimed();
        t.retry_state = Some(RetryState {
            blocked_since: t0(),
            attempts: 2,
            last_retry_delay_seconds: 2,
        });
        let e = on_submit_result(
            &mut t,
            SubmitResult::Error("rule not found"),
            &policy,
            at(1),
        );
        assert_eq!(e, SubmitEffect::Failed);
        assert_eq!(
            (t.status, t.message.as_str()),
            (T::Failed, "rule not found")
        );
        assert_eq!((t.retry_after, t.retry_state), (None, None));

        // An outage is not the target's failure: it stays claimed, holding
        // its slot, for the lease to bring it back.
        let mut t = claimed();
        let before = t.clone();
        let e = on_submit_result(&mut t, SubmitResult::Unavailable, &policy, at(1));
        assert_eq!(e, SubmitEffect::Unknown);
        assert!(!e.frees_slot());
        assert_eq!(t, before);

        let mut t = claimed();
        on_submit_failed(&mut t, "boom", at(2));
        assert_eq!((t.status, t.message.as_str()), (T::Failed, "boom"));
    }
}
