//! Sim tests on tokio's paused clock: latencies are exact and nothing
//! sleeps for real.

use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use super::*;

fn comp(ty: ComponentType, id: &str, rack: &str) -> ComponentRef {
    ComponentRef {
        id: Uuid::new_v4(),
        component_type: ty,
        external_id: id.to_string(),
        rack: rack.to_string(),
    }
}

fn computes(n: usize) -> Vec<ComponentRef> {
    (0..n)
        .map(|i| comp(ComponentType::Compute, &format!("c-{i}"), "rack-1"))
        .collect()
}

/// Elapsed paused-clock time of each of `rounds` power calls per component.
async fn latencies(seed: u64, rounds: usize) -> Vec<Duration> {
    let fleet = SimFleet::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    let mut out = Vec::new();
    for _ in 0..rounds {
        for c in computes(3) {
            let start = Instant::now();
            fleet
                .power_control(std::slice::from_ref(&c), PowerOp::PowerOn)
                .await
                .unwrap();
            out.push(start.elapsed());
        }
    }
    out
}

#[tokio::test(start_paused = true)]
async fn latency_is_deterministic_by_seed_and_within_jitter() {
    let a = latencies(7, 3).await;
    let b = latencies(7, 3).await;
    let c = latencies(8, 3).await;
    assert_eq!(a, b);
    assert_ne!(a, c);
    for d in &a {
        // 200 ms ± 20 %, plus the paused clock's millisecond granularity.
        assert!(
            *d >= Duration::from_millis(159) && *d <= Duration::from_millis(241),
            "{d:?}"
        );
    }
    // Jitter actually varies between calls.
    assert!(a.iter().any(|d| *d != a[0]));
}

#[tokio::test(start_paused = true)]
async fn zero_latency_never_sleeps() {
    let fleet = SimFleet::new(SimConfig::instant());
    let start = Instant::now();
    let cs = computes(2);
    fleet.power_control(&cs, PowerOp::PowerOff).await.unwrap();
    let states = fleet.power_status(&cs).await.unwrap();
    assert_eq!(states["c-0"], PowerState::Off);
    fleet
        .firmware_start(&cs, &FirmwareRequest::default())
        .await
        .unwrap();
    let fw = fleet.firmware_status(&cs).await.unwrap();
    assert_eq!(fw["c-1"], FirmwareState::Completed);
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[test]
fn fault_matching_by_rack_type_component_and_operation() {
    let c = comp(ComponentType::Compute, "c-1", "rack-1");
    let any = SimFault::default();
    assert!(any.matches(&c, CallKind::Power) && any.matches(&c, CallKind::Firmware));
    let rack = SimFault {
        rack: Some("rack-2".into()),
        ..SimFault::default()
    };
    assert!(!rack.matches(&c, CallKind::Power));
    let ty = SimFault {
        component_type: Some(ComponentType::NvSwitch),
        ..SimFault::default()
    };
    assert!(!ty.matches(&c, CallKind::Power));
    let component = SimFault {
        component: Some("c-1".into()),
        rack: Some("rack-1".into()),
        component_type: Some(ComponentType::Compute),
        ..SimFault::default()
    };
    assert!(component.matches(&c, CallKind::Power));
    let firmware_only = SimFault {
        operation: FaultOperation::Firmware,
        ..SimFault::default()
    };
    assert!(firmware_only.matches(&c, CallKind::Firmware));
    assert!(!firmware_only.matches(&c, CallKind::Power));
}

#[tokio::test(start_paused = true)]
async fn power_fail_fault_names_components_and_spares_others() {
    let fleet = SimFleet::new(SimConfig::default());
    fleet.set_faults(vec![SimFault {
        component: Some("c-1".into()),
        operation: FaultOperation::Power,
        ..SimFault::default()
    }]);
    let cs = computes(3);
    let err = fleet
        .power_control(&cs, PowerOp::PowerOff)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "power_off failed for components [c-1]: simulated power fault"
    );
    let states = fleet.component_states(&[]);
    let power: Vec<_> = states.iter().map(|s| s.power_state).collect();
    assert_eq!(power, [PowerState::Off, PowerState::On, PowerState::Off]);
    // A firmware-only fault does not touch power calls.
    fleet.set_faults(vec![SimFault {
        operation: FaultOperation::Firmware,
        ..SimFault::default()
    }]);
    fleet.power_control(&cs, PowerOp::PowerOn).await.unwrap();
    let log = fleet.call_log(0);
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].outcome, "fail");
    assert_eq!(log[0].detail, "power_off");
    assert_eq!(log[1].outcome, "ok");
    assert_eq!(fleet.call_log(1).len(), 1);
    fleet.clear_faults();
    assert!(fleet.faults().is_empty());
}

#[tokio::test(start_paused = true)]
async fn slow_fault_multiplies_latency() {
    let fleet = SimFleet::new(SimConfig {
        jitter: 0.0,
        faults: vec![SimFault {
            effect: FaultEffect::Slow,
            ..SimFault::default()
        }],
        ..SimConfig::default()
    });
    let start = Instant::now();
    fleet
        .power_control(&computes(1), PowerOp::Restart)
        .await
        .unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(2000));
    assert_eq!(fleet.call_log(0)[0].outcome, "slow");
}

#[tokio::test(start_paused = true)]
async fn firmware_update_is_asynchronous_and_completes() {
    let mut seed = HashMap::new();
    seed.insert("c-0".to_string(), "0.9.0".to_string());
    let fleet = SimFleet::with_firmware(
        SimConfig {
            jitter: 0.0,
            ..SimConfig::default()
        },
        seed,
    );
    let cs = computes(2);
    assert_eq!(
        fleet.firmware_status(&cs).await.unwrap()["c-0"],
        FirmwareState::Unknown
    );
    let start = Instant::now();
    let request = FirmwareRequest {
        target_version: "2.0.0".into(),
        ..FirmwareRequest::default()
    };
    fleet.firmware_start(&cs, &request).await.unwrap();
    // Returns after the short call latency only.
    assert_eq!(start.elapsed(), Duration::from_millis(20));
    assert_eq!(
        fleet.firmware_status(&cs).await.unwrap()["c-0"],
        FirmwareState::Queued
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        fleet.firmware_status(&cs).await.unwrap()["c-1"],
        FirmwareState::Verifying
    );
    let states = fleet.component_states(&["c-0".to_string()]);
    assert_eq!(states.len(), 1);
    assert_eq!(states[0].firmware_version, "0.9.0");
    assert!(states[0].firmware_updating);
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let status = fleet.firmware_status(&cs).await.unwrap();
    assert!(status.values().all(|s| *s == FirmwareState::Completed));
    let states = fleet.component_states(&[]);
    assert!(states.iter().all(|s| s.firmware_version == "2.0.0"));
    assert!(states.iter().all(|s| !s.firmware_updating));
}

#[tokio::test(start_paused = true)]
async fn firmware_fail_and_hang_faults() {
    let fleet = SimFleet::new(SimConfig {
        jitter: 0.0,
        faults: vec![
            SimFault {
                component: Some("c-0".into()),
                operation: FaultOperation::Firmware,
                effect: FaultEffect::Fail,
                ..SimFault::default()
            },
            SimFault {
                component: Some("c-1".into()),
                effect: FaultEffect::Hang,
                ..SimFault::default()
            },
        ],
        ..SimConfig::default()
    });
    let cs = computes(3);
    let request = FirmwareRequest {
        target_version: "2.0.0".into(),
        ..FirmwareRequest::default()
    };
    fleet.firmware_start(&cs, &request).await.unwrap();
    assert_eq!(fleet.call_log(0)[0].outcome, "hang");
    tokio::time::sleep(Duration::from_secs(60)).await;
    let status = fleet.firmware_status(&cs).await.unwrap();
    assert_eq!(status["c-0"], FirmwareState::Failed);
    assert_eq!(status["c-1"], FirmwareState::Verifying);
    assert_eq!(status["c-2"], FirmwareState::Completed);
    let states = fleet.component_states(&[]);
    assert_eq!(states[0].firmware_version, "1.0.0");
    assert_eq!(states[1].firmware_version, "1.0.0");
    assert!(states[1].firmware_updating);
    assert_eq!(states[2].firmware_version, "2.0.0");
}

#[tokio::test(start_paused = true)]
async fn hanging_power_call_is_cancel_safe() {
    let fleet = SimFleet::new(SimConfig::default());
    fleet.set_faults(vec![SimFault {
        rack: Some("rack-1".into()),
        effect: FaultEffect::Hang,
        ..SimFault::default()
    }]);
    let cs = computes(1);
    let token = tokio_util::sync::CancellationToken::new();
    let canceller = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        canceller.cancel();
    });
    let start = Instant::now();
    tokio::select! {
        _ = fleet.power_control(&cs, PowerOp::PowerOff) => panic!("hang returned"),
        _ = token.cancelled() => {}
    }
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    // The dropped call changed nothing and the lock is free.
    assert_eq!(fleet.component_states(&[])[0].power_state, PowerState::On);
    fleet.clear_faults();
    fleet.power_control(&cs, PowerOp::PowerOff).await.unwrap();
    assert_eq!(fleet.component_states(&[])[0].power_state, PowerState::Off);
}

#[tokio::test]
async fn registry_covers_every_type_with_all_capabilities() {
    let fleet = SimFleet::new(SimConfig::instant());
    let registry = fleet.registry();
    for ty in ComponentType::KNOWN {
        for cap in [
            crate::manager::Capability::PowerControl,
            crate::manager::Capability::PowerStatus,
            crate::manager::Capability::FirmwareControl,
            crate::manager::Capability::FirmwareStatus,
        ] {
            registry.check(ty, cap).unwrap();
        }
        assert!(
            registry
                .check(ty, crate::manager::Capability::BringUpControl)
                .is_err()
        );
    }
}

/// A finished update wakes the pollers of its own rack at its end, and
/// not those of another rack (one fleet-wide feed woke every poller).
#[tokio::test(start_paused = true)]
async fn update_end_wakes_only_its_racks_pollers() {
    let fleet = SimFleet::new(SimConfig {
        firmware_update_ms: 1000,
        jitter: 0.0,
        ..SimConfig::default()
    });
    let a = [comp(ComponentType::Compute, "a-1", "rack-a")];
    let b = [comp(ComponentType::Compute, "b-1", "rack-b")];
    let request = FirmwareRequest {
        target_version: "2.0.0".into(),
        ..FirmwareRequest::default()
    };
    let mut feed_a = FirmwareStatus::change_feed(fleet.as_ref(), &a).unwrap();
    let feed_b = FirmwareStatus::change_feed(fleet.as_ref(), &b).unwrap();
    let start = Instant::now();
    fleet.firmware_start(&a, &request).await.unwrap();
    feed_a.changed().await.unwrap();
    assert!(start.elapsed() >= Duration::from_millis(1000));
    assert_eq!(
        fleet.firmware_status(&a).await.unwrap()["a-1"],
        FirmwareState::Completed
    );
    assert!(!feed_b.has_changed().unwrap());
}
