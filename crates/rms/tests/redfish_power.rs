//! Power through the Redfish back end against sushy-tools' own emulator
//! (`sushy-emulator --fake`, unmodified): discovery, reset round trips with
//! PowerState polling (the fake driver applies a reset after a random
//! 1–11 s), and the BMC's refusals (501 for a reset type it does not
//! implement, 404 for an unknown system).

use rackflow_testkit::redfish as support;

use std::time::Duration;

use rackflow_rms::job::JobError;
use rackflow_rms::redfish::{PowerState, RedfishError, RedfishNode, ResetType};
use support::{Emulator, Flavor, Options, fast_config};

const SETTLE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(200);

#[tokio::test]
async fn discovers_the_only_system_and_reads_its_power_state() {
    let Some(emu) = Emulator::start(Options::new(Flavor::Sushy)).await else {
        return;
    };
    let node = emu.node();
    let system = node.system_uri().await.unwrap();
    // The fake driver lists its one system by UUID, not by its name "fake".
    assert!(system.starts_with("/redfish/v1/Systems/"), "{system}");
    assert_ne!(system, "/redfish/v1/Systems/fake");
    assert_eq!(system.len(), "/redfish/v1/Systems/".len() + 36, "{system}");
    // The fake system starts powered off.
    assert_eq!(node.power_state().await.unwrap(), PowerState::Off);
}

#[tokio::test]
async fn on_forceoff_and_graceful_restart_round_trip() {
    let Some(emu) = Emulator::start(Options::new(Flavor::Sushy)).await else {
        return;
    };
    let node = emu.node();

    let on = node
        .set_power_and_wait(&ResetType::On, SETTLE, POLL)
        .await
        .unwrap();
    assert!(on.reset_sent);
    assert_eq!(on.target, PowerState::On);
    assert_eq!(on.states_seen.first(), Some(&PowerState::Off), "{on:?}");
    assert_eq!(on.states_seen.last(), Some(&PowerState::On), "{on:?}");
    assert_eq!(node.power_state().await.unwrap(), PowerState::On);

    // Already on: nothing is sent.
    let again = node
        .set_power_and_wait(&ResetType::On, SETTLE, POLL)
        .await
        .unwrap();
    assert!(!again.reset_sent);
    assert_eq!(again.states_seen, vec![PowerState::On]);

    // A restart reads Off on this emulator until it comes back On (unless
    // its random delay ends before the first read, hence no exact list).
    let restart = node
        .set_power_and_wait(&ResetType::GracefulRestart, SETTLE, POLL)
        .await
        .unwrap();
    assert!(restart.reset_sent);
    assert_eq!(
        restart.states_seen.last(),
        Some(&PowerState::On),
        "{restart:?}"
    );
    assert!(
        restart
            .states_seen
            .iter()
            .all(|s| *s == PowerState::Off || *s == PowerState::On),
        "{restart:?}"
    );

    let off = node
        .set_power_and_wait(&ResetType::ForceOff, SETTLE, POLL)
        .await
        .unwrap();
    assert!(off.reset_sent);
    assert_eq!(off.states_seen.last(), Some(&PowerState::Off), "{off:?}");
    assert_eq!(node.power_state().await.unwrap(), PowerState::Off);
}

#[tokio::test]
async fn a_reset_type_the_bmc_does_not_implement_is_the_501_variant() {
    let Some(emu) = Emulator::start(Options::new(Flavor::Sushy)).await else {
        return;
    };
    let node = emu.node();
    // The fake system advertises Nmi but its driver cannot do it: 501.
    let err = node.reset(&ResetType::Nmi).await.unwrap_err();
    match &err {
        RedfishError::ResetTypeUnsupported {
            reset_type,
            message,
        } => {
            assert_eq!(reset_type, &ResetType::Nmi);
            assert_eq!(message, "Power state Nmi is not supported");
        }
        other => panic!("expected ResetTypeUnsupported, got {other:?}"),
    }
    assert!(err.to_string().contains("HTTP 501"), "{err}");
    assert_eq!(err.job_error(), JobError::FailedPrecondition);

    // A reset type nobody advertises is refused before it is sent ...
    let bogus = ResetType::parse("Bogus");
    let err = node.reset(&bogus).await.unwrap_err();
    match &err {
        RedfishError::ResetTypeNotAllowed { allowed, .. } => {
            assert!(allowed.iter().any(|a| a == "ForceOff"), "{allowed:?}")
        }
        other => panic!("expected ResetTypeNotAllowed, got {other:?}"),
    }
    // ... unless the check is off; then the BMC answers 501 itself.
    let mut config = fast_config();
    config.check_allowable_values = false;
    let unchecked = RedfishNode::new(emu.client(None, config));
    match unchecked.reset(&bogus).await.unwrap_err() {
        RedfishError::ResetTypeUnsupported { message, .. } => {
            assert_eq!(message, "Power state Bogus is not supported")
        }
        other => panic!("expected ResetTypeUnsupported, got {other:?}"),
    }
    // Neither attempt changed anything.
    assert_eq!(node.power_state().await.unwrap(), PowerState::Off);
}

#[tokio::test]
async fn an_unknown_system_is_the_404_variant() {
    let Some(emu) = Emulator::start(Options::new(Flavor::Sushy)).await else {
        return;
    };
    let node = RedfishNode::with_system(
        emu.client(None, fast_config()),
        "/redfish/v1/Systems/no-such-system",
    );
    for err in [
        node.power_state().await.unwrap_err(),
        node.reset(&ResetType::On).await.unwrap_err(),
    ] {
        match &err {
            RedfishError::SystemNotFound { uri, message } => {
                assert_eq!(uri, "/redfish/v1/Systems/no-such-system");
                assert_eq!(message, "Fake system no-such-system was not found");
            }
            other => panic!("expected SystemNotFound, got {other:?}"),
        }
        assert_eq!(err.job_error(), JobError::TargetNotFound);
    }
}

#[tokio::test]
async fn resets_without_a_power_state_to_reach_are_refused_before_sending() {
    let Some(emu) = Emulator::start(Options::new(Flavor::Sushy)).await else {
        return;
    };
    let node = emu.node();
    let err = node
        .set_power_and_wait(&ResetType::Nmi, SETTLE, POLL)
        .await
        .unwrap_err();
    assert!(
        matches!(err, RedfishError::NoPowerTarget(ResetType::Nmi)),
        "{err:?}"
    );
}

#[tokio::test]
async fn an_unreachable_bmc_is_a_connect_error() {
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = rackflow_rms::redfish::RedfishClient::new(
        &format!("http://127.0.0.1:{port}"),
        None,
        fast_config(),
    )
    .unwrap();
    let err = RedfishNode::new(client).power_state().await.unwrap_err();
    match &err {
        RedfishError::Transport { kind, .. } => {
            assert_eq!(
                *kind,
                rackflow_rms::redfish::TransportKind::Connect,
                "{err}"
            )
        }
        other => panic!("expected a transport error, got {other:?}"),
    }
    assert!(err.is_transient());
}

#[tokio::test]
async fn a_power_state_not_reached_in_time_is_a_timeout() {
    let Some(emu) = Emulator::start(Options::new(Flavor::Sushy)).await else {
        return;
    };
    let node = emu.node();
    node.system_uri().await.unwrap();
    // sushy applies a reset at a whole second (int(now) + 1..=11 s). Sending
    // it early in a second leaves at least ~0.7 s before the earliest
    // change, far more than the one read a zero timeout allows. Scenario,
    // not polling: this aligns with the wall clock's second, which sends no
    // event.
    loop {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        if now.subsec_millis() < 300 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let err = node
        .set_power_and_wait(&ResetType::On, Duration::ZERO, POLL)
        .await
        .unwrap_err();
    match &err {
        RedfishError::PowerTimeout { target, last, .. } => {
            assert_eq!(*target, PowerState::On);
            assert_eq!(*last, PowerState::Off);
        }
        other => panic!("expected PowerTimeout, got {other:?}"),
    }
    assert_eq!(err.job_error(), JobError::Timeout);
    // The reset was sent all the same: the system does come on.
    let on = node
        .set_power_and_wait(&ResetType::On, SETTLE, POLL)
        .await
        .unwrap();
    assert_eq!(on.states_seen.last(), Some(&PowerState::On));
}
