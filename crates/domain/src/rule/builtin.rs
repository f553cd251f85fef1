//! The hard-coded default rules (spec flow-core §4.5): what a task runs when
//! no explicit, rack-associated or default database rule exists.
//!
//! Every built-in has `max_parallel = 0` (one batch). Power-off orders are
//! Compute → NVSwitch → PowerShelf and power-on orders the reverse, because
//! the shelf feeds the trays: cutting it first would drop the trays hard, and
//! trays cannot come up before it. Sleep durations are written as Go
//! duration strings so stored definitions read unambiguously.

use std::time::Duration;

use serde_json::{Map, Value};

use super::action::params;
use super::{ActionConfig, RetryPolicy, RuleDefinition, SequenceStep};
use crate::ComponentType::{self, Compute, NvSwitch, PowerShelf};
use crate::task::TaskType;

/// The built-in rule for `(task_type, code)`; an empty definition (no
/// steps) when there is none, e.g. `warm_reset`.
pub fn builtin_rule(task_type: TaskType, code: &str) -> RuleDefinition {
    let steps = match (task_type, code) {
        (TaskType::PowerControl, "power_on") => power_on(),
        (TaskType::PowerControl, "power_off") => power_off(),
        (TaskType::PowerControl, "force_power_on") => force_power_on(),
        (TaskType::PowerControl, "force_power_off") => force_power_off(),
        (TaskType::PowerControl, "restart") => restart(),
        (TaskType::PowerControl, "force_restart") => force_restart(),
        (TaskType::PowerControl, "cold_reset") => cold_reset(),
        // One recipe for every firmware operation: the direction is in the
        // task's own operation info.
        (TaskType::FirmwareControl, "upgrade" | "downgrade" | "rollback") => firmware(),
        (TaskType::BringUp, "bring_up") => bring_up(),
        (TaskType::BringUp, "ingest") => ingest(),
        (TaskType::Decommission, "decommission") => decommission(),
        _ => Vec::new(),
    };
    RuleDefinition {
        steps,
        ..RuleDefinition::empty()
    }
}

/// Whether a built-in exists for `(task_type, code)`.
pub fn has_builtin_rule(task_type: TaskType, code: &str) -> bool {
    !builtin_rule(task_type, code).steps.is_empty()
}

// ---- building blocks -------------------------------------------------------

const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

const fn mins(m: u64) -> Duration {
    Duration::from_secs(m * 60)
}

fn retry(max_attempts: i32, initial_interval: Duration, backoff_coefficient: f64) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        initial_interval,
        backoff_coefficient,
        max_interval: None,
    }
}

fn action(
    name: &str,
    timeout: Option<Duration>,
    poll: Option<Duration>,
    p: &[(&str, &str)],
) -> ActionConfig {
    let parameters: Map<String, Value> = p
        .iter()
        .map(|(k, v)| ((*k).to_string(), Value::String((*v).to_string())))
        .collect();
    ActionConfig {
        name: name.to_string(),
        timeout,
        poll_interval: poll,
        parameters,
    }
}

/// PowerControl with the task's own operation.
fn power() -> ActionConfig {
    action("PowerControl", None, None, &[])
}

/// PowerControl with an explicit operation (composite recipes must not pass
/// the task's `restart` through: the BMC would do an atomic cycle).
fn power_op(operation: &str) -> ActionConfig {
    action(
        "PowerControl",
        None,
        None,
        &[(params::OPERATION, operation)],
    )
}

fn verify(expected: &str, timeout: Duration, poll: Duration) -> ActionConfig {
    action(
        "VerifyPowerStatus",
        Some(timeout),
        Some(poll),
        &[(params::EXPECTED_STATUS, expected)],
    )
}

fn sleep(duration: &str) -> ActionConfig {
    action("Sleep", None, None, &[(params::DURATION, duration)])
}

fn firmware_control() -> ActionConfig {
    action(
        "FirmwareControl",
        None,
        None,
        &[(params::POLL_INTERVAL, "2m"), (params::POLL_TIMEOUT, "45m")],
    )
}

fn step(
    component_type: ComponentType,
    stage: i32,
    timeout: Duration,
    retry: Option<RetryPolicy>,
    main: ActionConfig,
) -> SequenceStep {
    SequenceStep {
        component_type,
        stage,
        max_parallel: 0,
        timeout: Some(timeout),
        retry,
        pre_operation: Vec::new(),
        main_operation: main,
        post_operation: Vec::new(),
        delay_after: None,
    }
}

fn with_pre(mut s: SequenceStep, actions: Vec<ActionConfig>) -> SequenceStep {
    s.pre_operation = actions;
    s
}

fn with_post(mut s: SequenceStep, actions: Vec<ActionConfig>) -> SequenceStep {
    s.post_operation = actions;
    s
}

/// The per-type power step timings every power recipe shares: shelves and
/// switches 15 min with 3 tries from 5 s, compute trays 20 min from 1 s.
fn power_step(ty: ComponentType, stage: i32, main: ActionConfig) -> SequenceStep {
    match ty {
        Compute => step(ty, stage, mins(20), Some(retry(3, secs(1), 2.0)), main),
        _ => step(ty, stage, mins(15), Some(retry(3, secs(5), 2.0)), main),
    }
}

/// A final stage checking all three types at once (step 20 min, 2 tries
/// from 5 s ×1.5).
fn verify_all(stage: i32, expected: &str, poll: Duration) -> Vec<SequenceStep> {
    [PowerShelf, NvSwitch, Compute]
        .into_iter()
        .map(|ty| {
            step(
                ty,
                stage,
                mins(20),
                Some(retry(2, secs(5), 1.5)),
                verify(expected, mins(5), poll),
            )
        })
        .collect()
}

// ---- the rules ---------------------------------------------------------------

fn power_on() -> Vec<SequenceStep> {
    [PowerShelf, NvSwitch, Compute]
        .into_iter()
        .zip(1..)
        .map(|(ty, stage)| {
            with_post(
                power_step(ty, stage, power()),
                vec![verify("on", mins(5), secs(10))],
            )
        })
        .collect()
}

fn power_off() -> Vec<SequenceStep> {
    [Compute, NvSwitch, PowerShelf]
        .into_iter()
        .zip(1..)
        .map(|(ty, stage)| {
            with_post(
                power_step(ty, stage, power()),
                vec![verify("off", mins(5), secs(10))],
            )
        })
        .collect()
}

fn force_power_on() -> Vec<SequenceStep> {
    let mut steps = vec![
        power_step(PowerShelf, 1, power()),
        power_step(NvSwitch, 2, power()),
        with_post(power_step(Compute, 3, power()), vec![sleep("10s")]),
    ];
    steps.extend(verify_all(4, "on", secs(5)));
    steps
}

fn force_power_off() -> Vec<SequenceStep> {
    let mut steps = vec![
        with_post(power_step(Compute, 1, power()), vec![sleep("10s")]),
        with_post(power_step(NvSwitch, 2, power()), vec![sleep("5s")]),
        with_post(power_step(PowerShelf, 3, power()), vec![sleep("5s")]),
    ];
    steps.extend(verify_all(4, "off", secs(5)));
    steps
}

fn restart() -> Vec<SequenceStep> {
    let off = [Compute, NvSwitch, PowerShelf]
        .into_iter()
        .zip(1..)
        .map(|(ty, stage)| {
            with_post(
                power_step(ty, stage, power_op("power_off")),
                vec![verify("off", mins(10), secs(15))],
            )
        });
    let on = [PowerShelf, NvSwitch, Compute]
        .into_iter()
        .zip(4..)
        .map(|(ty, stage)| {
            with_post(
                power_step(ty, stage, power_op("power_on")),
                vec![verify("on", mins(10), secs(15))],
            )
        });
    off.chain(on).collect()
}

fn force_restart() -> Vec<SequenceStep> {
    let off = "force_power_off";
    let on = "force_power_on";
    let mut steps = vec![
        with_post(power_step(Compute, 1, power_op(off)), vec![sleep("10s")]),
        with_post(power_step(NvSwitch, 2, power_op(off)), vec![sleep("5s")]),
        with_post(power_step(PowerShelf, 3, power_op(off)), vec![sleep("5s")]),
    ];
    // Confirm everything is off before powering back on: a silent power-off
    // failure must not pass for a completed power cycle.
    steps.extend(verify_all(4, "off", secs(15)));
    steps.extend([
        with_post(power_step(PowerShelf, 5, power_op(on)), vec![sleep("10s")]),
        with_post(power_step(NvSwitch, 6, power_op(on)), vec![sleep("15s")]),
        with_post(power_step(Compute, 7, power_op(on)), vec![sleep("10s")]),
    ]);
    steps.extend(verify_all(8, "on", secs(5)));
    steps
}

/// An AC power cycle: only compute trays support it.
fn cold_reset() -> Vec<SequenceStep> {
    vec![step(Compute, 1, mins(20), None, power())]
}

/// Compute then NVSwitch; power shelves are updated out of band, and no
/// power cycle is included (a separate task or a custom rule does that).
fn firmware() -> Vec<SequenceStep> {
    [Compute, NvSwitch]
        .into_iter()
        .zip(1..)
        .map(|(ty, stage)| {
            step(
                ty,
                stage,
                mins(45),
                Some(retry(2, secs(30), 1.5)),
                firmware_control(),
            )
        })
        .collect()
}

fn bring_up() -> Vec<SequenceStep> {
    let power_on_step = |ty, stage| {
        with_post(
            step(
                ty,
                stage,
                mins(15),
                Some(retry(3, secs(10), 2.0)),
                power_op("power_on"),
            ),
            vec![verify("on", mins(10), secs(15))],
        )
    };
    vec![
        power_on_step(PowerShelf, 1),
        power_on_step(Compute, 2),
        step(
            Compute,
            3,
            mins(60),
            Some(retry(2, secs(30), 2.0)),
            firmware_control(),
        ),
        power_on_step(NvSwitch, 4),
        step(
            NvSwitch,
            5,
            mins(10),
            Some(retry(2, secs(10), 2.0)),
            action("VerifyFirmwareConsistency", None, None, &[]),
        ),
        // Power-cycle the trays so the firmware flashed in stage 3 is live.
        with_post(
            with_pre(
                step(
                    Compute,
                    6,
                    mins(20),
                    Some(retry(2, secs(10), 2.0)),
                    power_op("power_on"),
                ),
                vec![
                    power_op("power_off"),
                    verify("off", mins(5), secs(15)),
                    sleep("30s"),
                ],
            ),
            vec![verify("on", mins(10), secs(15))],
        ),
    ]
}

/// Registers components with their managers; no power or firmware work,
/// and power shelves are managed out of band.
fn ingest() -> Vec<SequenceStep> {
    [Compute, NvSwitch]
        .into_iter()
        .map(|ty| {
            step(
                ty,
                1,
                mins(10),
                None,
                action("InjectExpectation", None, None, &[]),
            )
        })
        .collect()
}

/// Strictly compute, then switches, then shelves, each waiting until
/// decommissioned.
fn decommission() -> Vec<SequenceStep> {
    [Compute, NvSwitch, PowerShelf]
        .into_iter()
        .zip(1..)
        .map(|(ty, stage)| {
            with_post(
                step(
                    ty,
                    stage,
                    mins(240),
                    Some(retry(3, secs(30), 2.0)),
                    action("DecommissionControl", None, None, &[]),
                ),
                vec![action(
                    "WaitDecommissioned",
                    Some(mins(240)),
                    Some(secs(30)),
                    &[],
                )],
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::{Action, PowerState};
    use super::*;

    /// Every (type, code) the task model knows.
    fn all_operations() -> Vec<(TaskType, &'static str)> {
        TaskType::ALL
            .iter()
            .flat_map(|t| t.valid_codes().iter().map(move |c| (*t, *c)))
            .collect()
    }

    /// Stage numbers per component type name, in definition order.
    type StageOrder = BTreeMap<&'static str, Vec<i32>>;

    fn stage_order(d: &RuleDefinition) -> StageOrder {
        let mut out = StageOrder::new();
        for s in &d.steps {
            out.entry(s.component_type.name())
                .or_default()
                .push(s.stage);
        }
        out
    }

    fn order(pairs: &[(&'static str, &[i32])]) -> StageOrder {
        pairs.iter().map(|(t, s)| (*t, s.to_vec())).collect()
    }

    /// The typed actions of a step, in execution order.
    fn actions(s: &SequenceStep) -> Vec<Action> {
        s.actions().map(|a| a.action().unwrap()).collect()
    }

    fn power(op: Option<&str>) -> Action {
        Action::PowerControl {
            operation: op.map(str::to_string),
        }
    }

    fn verify(expected: PowerState, timeout: Duration, poll: Duration) -> Action {
        Action::VerifyPowerStatus {
            expected,
            timeout,
            poll_interval: poll,
        }
    }

    fn sleep(s: u64) -> Action {
        Action::Sleep { duration: secs(s) }
    }

    fn timing(s: &SequenceStep) -> (Duration, Option<(i32, Duration, f64)>) {
        (
            s.timeout.unwrap(),
            s.retry
                .as_ref()
                .map(|r| (r.max_attempts, r.initial_interval, r.backoff_coefficient)),
        )
    }

    fn rule(t: TaskType, code: &str) -> RuleDefinition {
        builtin_rule(t, code)
    }

    use PowerState::{Off, On};
    use TaskType::{BringUp, Decommission, FirmwareControl, PowerControl};

    #[test]
    fn every_builtin_validates_as_builtin_and_has_unlimited_parallelism() {
        for (t, code) in all_operations() {
            let d = builtin_rule(t, code);
            assert_eq!(d.version, "v1");
            d.validate_builtin()
                .unwrap_or_else(|e| panic!("{t}/{code}: {e}"));
            assert!(d.steps.iter().all(|s| s.max_parallel == 0), "{t}/{code}");
            // The definition survives the JSON round trip the task record makes.
            assert_eq!(
                RuleDefinition::from_json(&d.to_json()).unwrap(),
                d,
                "{t}/{code}"
            );
        }
    }

    #[test]
    fn which_operations_have_builtins() {
        let without: Vec<_> = all_operations()
            .into_iter()
            .filter(|(t, c)| !has_builtin_rule(*t, c))
            .collect();
        assert_eq!(
            without,
            [
                (PowerControl, "warm_reset"),
                (TaskType::InjectExpectation, "inject_expectation")
            ]
        );
        assert!(builtin_rule(PowerControl, "warm_reset").steps.is_empty());
        assert!(builtin_rule(PowerControl, "upgrade").steps.is_empty());
    }

    #[test]
    fn only_bring_up_and_ingest_need_executor_only_actions() {
        for (t, code) in all_operations() {
            let user_ok = builtin_rule(t, code).validate().is_ok();
            assert_eq!(
                user_ok,
                !matches!(code, "bring_up" | "ingest"),
                "{t}/{code}"
            );
        }
    }

    #[test]
    fn stage_order_per_component_type_matches_spec() {
        let cases: Vec<(TaskType, &str, StageOrder)> = vec![
            // PowerShelf s1 → NVSwitch s2 → Compute s3.
            (
                PowerControl,
                "power_on",
                order(&[("PowerShelf", &[1]), ("NVSwitch", &[2]), ("Compute", &[3])]),
            ),
            // Compute s1 → NVSwitch s2 → PowerShelf s3.
            (
                PowerControl,
                "power_off",
                order(&[("Compute", &[1]), ("NVSwitch", &[2]), ("PowerShelf", &[3])]),
            ),
            // PS s1, NVS s2, Compute s3; s4 all three verify.
            (
                PowerControl,
                "force_power_on",
                order(&[
                    ("PowerShelf", &[1, 4]),
                    ("NVSwitch", &[2, 4]),
                    ("Compute", &[3, 4]),
                ]),
            ),
            // Compute s1, NVS s2, PS s3; s4 verify off for all three.
            (
                PowerControl,
                "force_power_off",
                order(&[
                    ("Compute", &[1, 4]),
                    ("NVSwitch", &[2, 4]),
                    ("PowerShelf", &[3, 4]),
                ]),
            ),
            // off: Compute s1 / NVS s2 / PS s3; on: PS s4 / NVS s5 / Compute s6.
            (
                PowerControl,
                "restart",
                order(&[
                    ("Compute", &[1, 6]),
                    ("NVSwitch", &[2, 5]),
                    ("PowerShelf", &[3, 4]),
                ]),
            ),
            // off C s1 / N s2 / P s3; s4 verify; on P s5 / N s6 / C s7; s8 verify.
            (
                PowerControl,
                "force_restart",
                order(&[
                    ("Compute", &[1, 4, 7, 8]),
                    ("NVSwitch", &[2, 4, 6, 8]),
                    ("PowerShelf", &[3, 4, 5, 8]),
                ]),
            ),
            // Compute s1 only.
            (PowerControl, "cold_reset", order(&[("Compute", &[1])])),
            (PowerControl, "warm_reset", order(&[])),
            // Compute s1 then NVSwitch s2; no PowerShelf.
            (
                FirmwareControl,
                "upgrade",
                order(&[("Compute", &[1]), ("NVSwitch", &[2])]),
            ),
            (
                FirmwareControl,
                "downgrade",
                order(&[("Compute", &[1]), ("NVSwitch", &[2])]),
            ),
            (
                FirmwareControl,
                "rollback",
                order(&[("Compute", &[1]), ("NVSwitch", &[2])]),
            ),
            // PS s1; Compute s2, s3; NVS s4, s5; Compute s6.
            (
                BringUp,
                "bring_up",
                order(&[
                    ("PowerShelf", &[1]),
                    ("Compute", &[2, 3, 6]),
                    ("NVSwitch", &[4, 5]),
                ]),
            ),
            // Compute and NVSwitch stage 1; PowerShelf excluded.
            (
                BringUp,
                "ingest",
                order(&[("Compute", &[1]), ("NVSwitch", &[1])]),
            ),
            // Compute s1, NVS s2, PS s3.
            (
                Decommission,
                "decommission",
                order(&[("Compute", &[1]), ("NVSwitch", &[2]), ("PowerShelf", &[3])]),
            ),
        ];
        for (t, code, expected) in cases {
            assert_eq!(stage_order(&rule(t, code)), expected, "{t}/{code}");
        }
    }

    #[test]
    fn power_on_and_off_timings() {
        let on = rule(PowerControl, "power_on");
        let fast = Some((3, secs(5), 2.0));
        assert_eq!(timing(&on.steps[0]), (mins(15), fast));
        assert_eq!(timing(&on.steps[1]), (mins(15), fast));
        assert_eq!(timing(&on.steps[2]), (mins(20), Some((3, secs(1), 2.0))));
        for s in &on.steps {
            assert_eq!(actions(s), [power(None), verify(On, mins(5), secs(10))]);
        }
        let off = rule(PowerControl, "power_off");
        assert_eq!(timing(&off.steps[0]), (mins(20), Some((3, secs(1), 2.0))));
        assert_eq!(timing(&off.steps[1]), (mins(15), fast));
        assert_eq!(timing(&off.steps[2]), (mins(15), fast));
        for s in &off.steps {
            assert_eq!(actions(s), [power(None), verify(Off, mins(5), secs(10))]);
        }
    }

    #[test]
    fn force_power_on_and_off() {
        let on = rule(PowerControl, "force_power_on");
        assert_eq!(actions(&on.steps[0]), [power(None)]);
        assert_eq!(actions(&on.steps[1]), [power(None)]);
        assert_eq!(actions(&on.steps[2]), [power(None), sleep(10)]);
        for s in &on.steps[3..] {
            assert_eq!(timing(s), (mins(20), Some((2, secs(5), 1.5))));
            assert_eq!(actions(s), [verify(On, mins(5), secs(5))]);
        }
        let off = rule(PowerControl, "force_power_off");
        assert_eq!(actions(&off.steps[0]), [power(None), sleep(10)]);
        assert_eq!(actions(&off.steps[1]), [power(None), sleep(5)]);
        assert_eq!(actions(&off.steps[2]), [power(None), sleep(5)]);
        for s in &off.steps[3..] {
            assert_eq!(timing(s), (mins(20), Some((2, secs(5), 1.5))));
            assert_eq!(actions(s), [verify(Off, mins(5), secs(5))]);
        }
    }

    #[test]
    fn restart_uses_explicit_operations() {
        let r = rule(PowerControl, "restart");
        for s in &r.steps[..3] {
            assert_eq!(
                actions(s),
                [power(Some("power_off")), verify(Off, mins(10), secs(15))]
            );
        }
        for s in &r.steps[3..] {
            assert_eq!(
                actions(s),
                [power(Some("power_on")), verify(On, mins(10), secs(15))]
            );
        }
        assert_eq!(timing(&r.steps[0]).0, mins(20));
        assert_eq!(timing(&r.steps[5]).0, mins(20));
    }

    #[test]
    fn force_restart_cycle() {
        let r = rule(PowerControl, "force_restart");
        let by_stage = |n: i32| -> Vec<Vec<Action>> {
            r.steps
                .iter()
                .filter(|s| s.stage == n)
                .map(actions)
                .collect()
        };
        assert_eq!(
            by_stage(1),
            [vec![power(Some("force_power_off")), sleep(10)]]
        );
        assert_eq!(
            by_stage(2),
            [vec![power(Some("force_power_off")), sleep(5)]]
        );
        assert_eq!(
            by_stage(3),
            [vec![power(Some("force_power_off")), sleep(5)]]
        );
        assert_eq!(by_stage(4), vec![vec![verify(Off, mins(5), secs(15))]; 3]);
        assert_eq!(
            by_stage(5),
            [vec![power(Some("force_power_on")), sleep(10)]]
        );
        assert_eq!(
            by_stage(6),
            [vec![power(Some("force_power_on")), sleep(15)]]
        );
        assert_eq!(
            by_stage(7),
            [vec![power(Some("force_power_on")), sleep(10)]]
        );
        assert_eq!(by_stage(8), vec![vec![verify(On, mins(5), secs(5))]; 3]);
    }

    #[test]
    fn cold_reset_is_a_bare_compute_power_control() {
        let r = rule(PowerControl, "cold_reset");
        assert_eq!(timing(&r.steps[0]), (mins(20), None));
        assert_eq!(actions(&r.steps[0]), [power(None)]);
    }

    #[test]
    fn firmware_recipe() {
        for code in ["upgrade", "downgrade", "rollback"] {
            let r = rule(FirmwareControl, code);
            for s in &r.steps {
                assert_eq!(timing(s), (mins(45), Some((2, secs(30), 1.5))));
                assert_eq!(
                    actions(s),
                    [Action::FirmwareControl {
                        operation: None,
                        poll_interval: mins(2),
                        poll_timeout: mins(45)
                    }]
                );
            }
        }
    }

    #[test]
    fn bring_up_recipe() {
        let r = rule(BringUp, "bring_up");
        let up = vec![power(Some("power_on")), verify(On, mins(10), secs(15))];
        let fifteen = (mins(15), Some((3, secs(10), 2.0)));
        assert_eq!(
            (timing(&r.steps[0]), actions(&r.steps[0])),
            (fifteen, up.clone())
        );
        assert_eq!(
            (timing(&r.steps[1]), actions(&r.steps[1])),
            (fifteen, up.clone())
        );
        assert_eq!(timing(&r.steps[2]), (mins(60), Some((2, secs(30), 2.0))));
        assert_eq!(
            actions(&r.steps[2]),
            [Action::FirmwareControl {
                operation: None,
                poll_interval: mins(2),
                poll_timeout: mins(45)
            }]
        );
        assert_eq!((timing(&r.steps[3]), actions(&r.steps[3])), (fifteen, up));
        assert_eq!(timing(&r.steps[4]), (mins(10), Some((2, secs(10), 2.0))));
        assert_eq!(actions(&r.steps[4]), [Action::VerifyFirmwareConsistency]);
        assert_eq!(timing(&r.steps[5]), (mins(20), Some((2, secs(10), 2.0))));
        assert_eq!(
            actions(&r.steps[5]),
            [
                power(Some("power_off")),
                verify(Off, mins(5), secs(15)),
                sleep(30),
                power(Some("power_on")),
                verify(On, mins(10), secs(15)),
            ]
        );
        assert_eq!(r.steps[5].pre_operation.len(), 3);
    }

    #[test]
    fn ingest_recipe() {
        let r = rule(BringUp, "ingest");
        for s in &r.steps {
            assert_eq!(timing(s), (mins(10), None));
            assert_eq!(actions(s), [Action::InjectExpectation]);
        }
        assert!(!r.requires_linked_targets());
        assert!(rule(BringUp, "bring_up").requires_linked_targets());
    }

    #[test]
    fn decommission_recipe() {
        let r = rule(Decommission, "decommission");
        for s in &r.steps {
            assert_eq!(timing(s), (mins(240), Some((3, secs(30), 2.0))));
            assert_eq!(
                actions(s),
                [
                    Action::DecommissionControl,
                    Action::WaitDecommissioned {
                        timeout: mins(240),
                        poll_interval: secs(30)
                    }
                ]
            );
        }
    }
}
