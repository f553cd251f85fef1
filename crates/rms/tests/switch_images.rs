//! NVLink switch system images on the `sim` switch back end (issue 36):
//! a batch update of nine switches where one does not come back, the
//! legacy poller's state strings, the node exclusion, and the listing.

// Test helpers may unwrap: the panic is the failure report.
#![allow(clippy::unwrap_used)]

use rackflow_api::rack_manager as pb;
use rackflow_rms::switch::sim::{SwitchSimFault, SwitchSimFaultEffect};
use rackflow_testkit::rms::{TestRms, endpoint, user_pass};

const RACK: &str = "rack-sw";

fn switch(node: &str) -> pb::NodeInfo {
    pb::NodeInfo {
        node_id: node.into(),
        rack_id: RACK.into(),
        r#type: Some(pb::NodeType::SwitchGb200Nvidia as i32),
        bmc_endpoint: Some(endpoint("127.0.0.1", 443, user_pass())),
        host_endpoint: Some(endpoint("127.0.0.1", 22, user_pass())),
        ..Default::default()
    }
}

async fn start() -> TestRms {
    TestRms::start_custom(
        &[("nvos-25.02.bin", b"version=25.02.2000\n")],
        |c| {
            c.nodes.switch_sim.install_latency_ms = 80;
            c.nodes.switch_sim.read_latency_ms = 1;
            c.nodes.switch_sim.faults = vec![SwitchSimFault {
                node_id: "switch-09".into(),
                effect: SwitchSimFaultEffect::NoReturn,
            }];
        },
        None,
    )
    .await
}

fn update(nodes: Vec<pb::NodeInfo>) -> pb::UpdateSwitchSystemImageRequest {
    pb::UpdateSwitchSystemImageRequest {
        nodes: Some(pb::NodeSet { nodes }),
        image_filename: "nvos-25.02.bin".into(),
        local_file_path: "nvos-25.02.bin".into(),
        allow_onie_recovery: None,
    }
}

async fn image_status(rms: &TestRms, job_id: &str) -> pb::GetSwitchSystemImageJobStatusResponse {
    rms.client
        .clone()
        .get_switch_system_image_job_status(pb::GetSwitchSystemImageJobStatusRequest {
            job_id: job_id.into(),
        })
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test]
async fn a_batch_of_nine_with_one_switch_that_does_not_come_back() {
    let rms = start().await;
    let nodes: Vec<pb::NodeInfo> = (1..=9).map(|i| switch(&format!("switch-{i:02}"))).collect();
    let resp = rms
        .client
        .clone()
        .update_switch_system_image(update(nodes))
        .await
        .unwrap()
        .into_inner();
    let response = resp.response.unwrap();
    assert_eq!(
        response.status,
        pb::ReturnCode::Success as i32,
        "{response:?}"
    );
    assert_eq!(resp.jobs.len(), 9);
    let state = image_status(&rms, &response.job_id).await.state;
    assert!(state == "queued" || state == "running", "{state}");

    let parent = rms.wait_terminal(&response.job_id).await;
    assert_eq!(parent.execution_state, pb::JobExecutionState::Failed as i32);
    assert_eq!(
        parent.error_message,
        "1 of 9 switch system image updates failed"
    );
    let legacy = image_status(&rms, &response.job_id).await;
    assert_eq!(
        (legacy.status, legacy.state.as_str()),
        (pb::ReturnCode::Success as i32, "failed")
    );
    for job in &resp.jobs {
        let child = image_status(&rms, &job.job_id).await;
        if job.node_id == "switch-09" {
            assert_eq!(child.state, "failed");
            assert!(
                child.error_message.contains("did not come back"),
                "{child:?}"
            );
        } else {
            assert_eq!(child.state, "completed", "{child:?}");
            let result: serde_json::Value = serde_json::from_str(&child.result_json).unwrap();
            assert_eq!(result["active_image"], "25.02.2000");
        }
    }

    // Unknown and missing ids, in-band.
    let unknown = image_status(&rms, "nope").await;
    assert_eq!(
        (unknown.status, unknown.message.as_str()),
        (pb::ReturnCode::Failure as i32, "job nope not found")
    );
    let empty = image_status(&rms, " ").await;
    assert_eq!(empty.message, "job_id is required");
    rms.stop().await;
}

#[tokio::test]
async fn refusals_node_exclusion_and_the_listing() {
    let rms = start().await;
    let mut client = rms.client.clone();
    // A file outside the firmware directory, no nodes, a non-switch node.
    let outside = client
        .update_switch_system_image(pb::UpdateSwitchSystemImageRequest {
            local_file_path: "/etc/passwd".into(),
            ..update(vec![switch("switch-01")])
        })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert_eq!(outside.status, pb::ReturnCode::Failure as i32);
    assert!(
        outside.message.contains("outside firmware directory"),
        "{outside:?}"
    );
    let none = client
        .update_switch_system_image(update(vec![]))
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert_eq!(none.message, "No nodes specified in request");
    let mut compute = switch("compute-01");
    compute.r#type = Some(pb::NodeType::ComputeGb200Nvidia as i32);
    let mut no_host = switch("switch-02");
    no_host.host_endpoint = None;
    let mixed = client
        .update_switch_system_image(update(vec![compute, no_host, switch("switch-03")]))
        .await
        .unwrap()
        .into_inner();
    let response = mixed.response.unwrap();
    assert_eq!(response.status, pb::ReturnCode::Failure as i32);
    let errors: Vec<(&str, &str)> = response
        .node_results
        .iter()
        .filter(|r| r.status != pb::ReturnCode::Success as i32)
        .map(|r| (r.node_id.as_str(), r.error_message.as_str()))
        .collect();
    assert_eq!(
        errors,
        [
            ("compute-01", "node compute-01 is not a switch"),
            (
                "switch-02",
                "host endpoint is required for switch switch-02"
            )
        ]
    );
    // switch-03 is busy now: a second update is refused for it.
    let busy = client
        .update_switch_system_image(update(vec![switch("switch-03")]))
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert_eq!(busy.status, pb::ReturnCode::Failure as i32);
    assert!(
        busy.node_results[0].error_message.contains("in progress"),
        "{busy:?}"
    );
    rms.wait_terminal(&response.job_id).await;

    // The listing of a registered switch shows the new build running.
    client
        .create_nodes(pb::CreateNodesRequest {
            nodes: Some(pb::NodeSet {
                nodes: vec![switch("switch-03")],
            }),
        })
        .await
        .unwrap();
    let listed = client
        .list_switch_system_images(pb::ListSwitchSystemImagesRequest {
            rack_id: RACK.into(),
            node_id: "switch-03".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.status, pb::ReturnCode::Success as i32, "{listed:?}");
    let images: serde_json::Value = serde_json::from_str(&listed.images_json).unwrap();
    assert_eq!(images["current"], "25.02.2000");
    assert_eq!(images["files"], serde_json::json!(["nvos-25.02.bin"]));
    let missing = client
        .list_switch_system_images(pb::ListSwitchSystemImagesRequest {
            rack_id: RACK.into(),
            node_id: "nope".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (missing.status, missing.error_message.as_str()),
        (pb::ReturnCode::Failure as i32, "node not found")
    );
    rms.stop().await;
}

/// A firmware object whose switch trays get NVOS `build` (and nothing
/// else), served by `server`: (id, manifest).
fn nvos_object(
    server: &rackflow_testkit::artifacts::ArtifactServer,
    milestone: &str,
    build: &str,
) -> (String, String) {
    let (url, sha) = server.put(
        &format!("{milestone}/nvos-amd64-{build}.bin"),
        format!("version={build}\n").as_bytes(),
    );
    let json = serde_json::json!({
        "ProductName": "GB200-NVL72",
        "Milestones": [{ "Name": milestone, "BoardSKUs": [{
            "Type": "Switch Tray", "Name": "Switch",
            "Components": { "Software": [{ "Component": "NVOS", "Version": build, "Type": "Prod",
                "Locations": [{ "Location": url, "LocationType": "HTTP", "PackageName": "nvos", "SHA256": sha }] }] }
        }] }]
    })
    .to_string();
    (format!("GB200-NVL72_{milestone}"), json)
}

#[tokio::test]
async fn switch_images_from_the_firmware_object_catalogue() {
    let server = rackflow_testkit::artifacts::ArtifactServer::start().await;
    let rms = start().await;
    let mut client = rms.client.clone();
    let (id, json) = nvos_object(&server, "sw", "25.02.3000");
    client
        .add_firmware_object(pb::AddFirmwareObjectRequest {
            config_json: json.clone(),
            access_token: None,
            hardware_type: "GB200 NVL72".into(),
            set_default: true,
        })
        .await
        .unwrap();
    let object = rackflow_testkit::rms::settled_object(&client, &id).await;
    assert!(object.available, "{object:?}");
    assert_eq!(
        object.metadata.unwrap().switch_system_images[0].version,
        "25.02.3000"
    );

    // Stored: the default object of the hardware type, three switches.
    let stored = client
        .apply_stored_switch_system_image(pb::ApplyStoredSwitchSystemImageRequest {
            rack_id: RACK.into(),
            hardware_type: "GB200 NVL72".into(),
            nodes: Some(pb::NodeSet {
                nodes: (1..=3).map(|i| switch(&format!("switch-{i:02}"))).collect(),
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let response = stored.response.unwrap();
    assert_eq!(
        response.status,
        pb::ReturnCode::Success as i32,
        "{response:?}"
    );
    assert_eq!(
        (stored.object_id.as_str(), stored.image_filename.as_str()),
        (id.as_str(), "nvos-amd64-25.02.3000.bin")
    );
    let parent = rms.wait_terminal(&response.job_id).await;
    assert_eq!(
        parent.execution_state,
        pb::JobExecutionState::Completed as i32,
        "{parent:?}"
    );
    let history = client
        .get_firmware_object_history(pb::GetFirmwareObjectHistoryRequest {
            object_id: id.clone(),
            rack_ids: vec![],
        })
        .await
        .unwrap()
        .into_inner()
        .records;
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].firmware_type, "prod");
    assert_eq!(history[0].node_ids, ["switch-01", "switch-02", "switch-03"]);
    let dev = client
        .apply_stored_switch_system_image(pb::ApplyStoredSwitchSystemImageRequest {
            object_id: id.clone(),
            software_type: "dev".into(),
            nodes: Some(pb::NodeSet {
                nodes: vec![switch("switch-01")],
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert_eq!(
        dev.message,
        format!("firmware object {id} has no dev switch system image")
    );

    // Ephemeral: fetched per request, installed, its cache removed.
    let (_, newer) = nvos_object(&server, "sw2", "25.02.4000");
    let ephemeral = client
        .apply_switch_system_image(pb::ApplySwitchSystemImageRequest {
            rack_id: RACK.into(),
            config_json: newer,
            nodes: Some(pb::NodeSet {
                nodes: vec![switch("switch-04")],
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let response = ephemeral.response.unwrap();
    assert_eq!(
        response.status,
        pb::ReturnCode::Success as i32,
        "{response:?}"
    );
    let child = rms.wait_terminal(&ephemeral.jobs[0].job_id).await;
    let result: serde_json::Value = serde_json::from_str(&child.result_json).unwrap();
    assert_eq!(result["active_image"], "25.02.4000");
    let cache_root = rms.firmware_dir.join("firmware_objects_ephemeral");
    rackflow_testkit::wait::wait_until(
        "the ephemeral cache to be removed",
        std::time::Duration::from_secs(10),
        std::time::Duration::from_millis(20),
        || {
            let root = cache_root.clone();
            async move {
                std::fs::read_dir(&root)
                    .map_or(true, |mut d| d.next().is_none())
                    .then_some(())
            }
        },
        String::new,
    )
    .await;
    let bad = client
        .apply_switch_system_image(pb::ApplySwitchSystemImageRequest {
            config_json: "{}".into(),
            nodes: Some(pb::NodeSet {
                nodes: vec![switch("switch-04")],
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .response
        .unwrap();
    assert!(bad.message.starts_with("invalid config_json"), "{bad:?}");
    rms.stop().await;
}

fn with_password(mut node: pb::NodeInfo, password: &str) -> pb::NodeInfo {
    if let Some(host) = node.host_endpoint.as_mut() {
        host.credentials = Some(pb::Credentials {
            auth: Some(pb::credentials::Auth::UserPass(pb::UsernamePassword {
                username: "admin".into(),
                password: password.into(),
            })),
        });
    }
    node
}

/// The parent's state and each child's (state, error, result) of a batch.
async fn finished(
    rms: &TestRms,
    response: Option<pb::NodeBatchResponse>,
) -> (pb::JobStatus, Vec<pb::JobStatus>) {
    let response = response.unwrap();
    assert_eq!(
        response.status,
        pb::ReturnCode::Success as i32,
        "{response:?}"
    );
    let parent = rms.wait_terminal(&response.job_id).await;
    let mut states = rms.job(&response.job_id, true).await;
    states.remove(0);
    (parent, states)
}

#[tokio::test]
async fn password_rotation_resets_and_mtls() {
    let rms = start().await;
    let mut client = rms.client.clone();
    let rotate = |node: pb::NodeInfo| pb::UpdateSwitchSystemPasswordRequest {
        nodes: Some(pb::NodeSet { nodes: vec![node] }),
        username: "admin".into(),
        password: "n3w-Secret!".into(),
    };
    // Rotate: done, and the new password is nowhere in the job.
    let (parent, children) = finished(
        &rms,
        client
            .update_switch_system_password(rotate(switch("switch-01")))
            .await
            .unwrap()
            .into_inner()
            .response,
    )
    .await;
    assert_eq!(
        parent.execution_state,
        pb::JobExecutionState::Completed as i32,
        "{parent:?}"
    );
    let everything = format!("{parent:?}{children:?}");
    assert!(!everything.contains("n3w-Secret!"), "{everything}");
    // The old password fails now; the new one works.
    let (parent, children) = finished(
        &rms,
        client
            .update_switch_system_password(rotate(switch("switch-01")))
            .await
            .unwrap()
            .into_inner()
            .response,
    )
    .await;
    assert_eq!(parent.execution_state, pb::JobExecutionState::Failed as i32);
    assert_eq!(children[0].error_message, "switch rejected the credentials");
    assert_eq!(children[0].error_code, pb::JobError::Unauthenticated as i32);
    let (parent, _) = finished(
        &rms,
        client
            .update_switch_system_password(rotate(with_password(
                switch("switch-01"),
                "n3w-Secret!",
            )))
            .await
            .unwrap()
            .into_inner()
            .response,
    )
    .await;
    assert_eq!(
        parent.execution_state,
        pb::JobExecutionState::Completed as i32
    );

    // A factory reset brings the factory login back.
    let (parent, _) = finished(
        &rms,
        client
            .batch_reset_switch_factory_default(pb::BatchResetSwitchFactoryDefaultRequest {
                nodes: Some(pb::NodeSet {
                    nodes: vec![with_password(switch("switch-01"), "n3w-Secret!")],
                }),
                domain: None,
            })
            .await
            .unwrap()
            .into_inner()
            .response,
    )
    .await;
    assert_eq!(
        parent.execution_state,
        pb::JobExecutionState::Completed as i32,
        "{parent:?}"
    );
    let (parent, _) = finished(
        &rms,
        client
            .update_switch_system_password(rotate(switch("switch-01")))
            .await
            .unwrap()
            .into_inner()
            .response,
    )
    .await;
    assert_eq!(
        parent.execution_state,
        pb::JobExecutionState::Completed as i32,
        "the old login works again"
    );

    // mTLS off for the NVUE API.
    let (parent, children) = finished(
        &rms,
        client
            .batch_disable_switch_mtls(pb::BatchDisableSwitchMtlsRequest {
                nodes: Some(pb::NodeSet {
                    nodes: vec![switch("switch-02")],
                }),
                services: vec![pb::SwitchService::NvueApi as i32],
            })
            .await
            .unwrap()
            .into_inner()
            .response,
    )
    .await;
    assert_eq!(
        parent.execution_state,
        pb::JobExecutionState::Completed as i32
    );
    assert!(
        children[0].result_json.contains("SWITCH_SERVICE_NVUE_API"),
        "{children:?}"
    );
    for services in [vec![], vec![0], vec![42]] {
        let refused = client
            .batch_disable_switch_mtls(pb::BatchDisableSwitchMtlsRequest {
                nodes: Some(pb::NodeSet {
                    nodes: vec![switch("switch-02")],
                }),
                services,
            })
            .await
            .unwrap_err();
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    }

    // An SDN reset of a switch that does not come back.
    let (parent, children) = finished(
        &rms,
        client
            .batch_reset_switch_sdn_factory_default(pb::BatchResetSwitchSdnFactoryDefaultRequest {
                nodes: Some(pb::NodeSet {
                    nodes: vec![switch("switch-09")],
                }),
                domain: None,
            })
            .await
            .unwrap()
            .into_inner()
            .response,
    )
    .await;
    assert_eq!(parent.execution_state, pb::JobExecutionState::Failed as i32);
    assert_eq!(
        parent.error_message,
        "1 of 1 switch SDN factory-default resets failed"
    );
    assert!(
        children[0].error_message.contains("did not come back"),
        "{children:?}"
    );
    let no_user = client
        .update_switch_system_password(pb::UpdateSwitchSystemPasswordRequest {
            username: " ".into(),
            ..rotate(switch("switch-03"))
        })
        .await
        .unwrap_err();
    assert_eq!(
        (no_user.code(), no_user.message()),
        (tonic::Code::InvalidArgument, "username is required")
    );
    rms.stop().await;
}

#[tokio::test]
async fn switch_firmware_and_attestation() {
    let rms = start().await;
    let mut client = rms.client.clone();
    client
        .create_nodes(pb::CreateNodesRequest {
            nodes: Some(pb::NodeSet {
                nodes: vec![switch("switch-05")],
            }),
        })
        .await
        .unwrap();
    let bmc = pb::SwitchFirmwareComponentType::Bmc as i32;
    let pushed = client
        .push_switch_firmware(pb::PushSwitchFirmwareRequest {
            rack_id: RACK.into(),
            node_id: "switch-05".into(),
            component_type: bmc,
            filename: "bmc-bundle.fwpkg".into(),
            local_file_path: "nvos-25.02.bin".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(pushed.status, pb::ReturnCode::Success as i32, "{pushed:?}");
    let listed = client
        .list_switch_firmware(pb::ListSwitchFirmwareRequest {
            rack_id: RACK.into(),
            node_id: "switch-05".into(),
            component_type: bmc,
        })
        .await
        .unwrap()
        .into_inner();
    let listed: serde_json::Value = serde_json::from_str(&listed.result_json).unwrap();
    assert_eq!(
        listed["components"],
        serde_json::json!([{ "component": "BMC", "version": "1.0.0", "staged_files": ["bmc-bundle.fwpkg"] }])
    );
    let all = client
        .list_switch_firmware(pb::ListSwitchFirmwareRequest {
            rack_id: RACK.into(),
            node_id: "switch-05".into(),
            component_type: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let all: serde_json::Value = serde_json::from_str(&all.result_json).unwrap();
    assert_eq!(all["components"].as_array().unwrap().len(), 6);
    let outside = client
        .push_switch_firmware(pb::PushSwitchFirmwareRequest {
            rack_id: RACK.into(),
            node_id: "switch-05".into(),
            component_type: bmc,
            filename: "x".into(),
            local_file_path: "../../etc/passwd".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outside.status, pb::ReturnCode::Failure as i32);
    let unspecified = client
        .push_switch_firmware(pb::PushSwitchFirmwareRequest {
            component_type: 0,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(unspecified.code(), tonic::Code::InvalidArgument);
    let missing = client
        .list_switch_firmware(pb::ListSwitchFirmwareRequest {
            rack_id: RACK.into(),
            node_id: "nope".into(),
            component_type: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(missing.error_message, "node not found");

    // Attestation: per target and component; the same nonce gives the same
    // measurements, another nonce others.
    let mut compute = switch("compute-01");
    compute.r#type = Some(pb::NodeType::ComputeGb200Nvidia as i32);
    let collect = |nonce: Vec<u8>| pb::BatchCollectSwitchSpdmAttestationEvidenceRequest {
        targets: vec![switch("switch-06"), compute.clone()],
        nonce,
        domain: None,
    };
    let first = client
        .batch_collect_switch_spdm_attestation_evidence(collect(vec![7; 32]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        first.status,
        pb::ReturnCode::Failure as i32,
        "one target is no switch"
    );
    assert_eq!(first.message, "Collected SPDM evidence of 1 of 2 switches");
    let ok = &first.results[0];
    assert_eq!(ok.status, pb::ReturnCode::Success as i32);
    let ids: Vec<&str> = ok
        .components
        .iter()
        .map(|c| c.component_id.as_str())
        .collect();
    assert_eq!(ids, ["BMC", "FPGA", "EROT"]);
    assert_eq!(
        ok.components[0]
            .evidence
            .as_ref()
            .unwrap()
            .measurements
            .len(),
        32
    );
    assert_eq!(
        first.results[1].error_message.as_deref(),
        Some("node compute-01 is not a switch")
    );
    let again = client
        .batch_collect_switch_spdm_attestation_evidence(collect(vec![7; 32]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        again.results[0].components[0].evidence,
        ok.components[0].evidence
    );
    let other = client
        .batch_collect_switch_spdm_attestation_evidence(collect(vec![8; 32]))
        .await
        .unwrap()
        .into_inner();
    assert_ne!(
        other.results[0].components[0].evidence,
        ok.components[0].evidence
    );
    let short = client
        .batch_collect_switch_spdm_attestation_evidence(collect(vec![1; 5]))
        .await
        .unwrap_err();
    assert_eq!(short.code(), tonic::Code::InvalidArgument);
    rms.stop().await;
}

#[tokio::test]
async fn certificates_and_their_job_status() {
    let rms = start().await;
    let mut client = rms.client.clone();
    let resp = client
        .configure_switch_certificate(pb::ConfigureSwitchCertificateRequest {
            nodes: Some(pb::NodeSet {
                nodes: vec![switch("switch-07"), switch("switch-08")],
            }),
            services: vec![
                pb::SwitchService::NvueApi as i32,
                pb::SwitchService::ScaleUpFabricManager as i32,
            ],
            test_hello: true,
            domain: Some("dc1.example".into()),
        })
        .await
        .unwrap()
        .into_inner();
    let response = resp.response.unwrap();
    assert_eq!(
        response.status,
        pb::ReturnCode::Success as i32,
        "{response:?}"
    );
    assert_eq!(resp.jobs.len(), 2);
    let parent = rms.wait_terminal(&response.job_id).await;
    assert_eq!(
        parent.execution_state,
        pb::JobExecutionState::Completed as i32,
        "{parent:?}"
    );
    for job in &resp.jobs {
        let status = client
            .get_configure_switch_certificate_job_status(
                pb::GetConfigureSwitchCertificateJobStatusRequest {
                    job_id: job.job_id.clone(),
                },
            )
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            (
                status.status,
                status.state.as_str(),
                status.node_id.as_str()
            ),
            (
                pb::ReturnCode::Success as i32,
                "completed",
                job.node_id.as_str()
            )
        );
        let installed: serde_json::Value = serde_json::from_str(&status.result_json).unwrap();
        assert_eq!(
            installed["subject"],
            format!("CN={}.dc1.example", job.node_id)
        );
        assert_eq!(
            installed["services"],
            serde_json::json!([
                "SWITCH_SERVICE_NVUE_API",
                "SWITCH_SERVICE_SCALE_UP_FABRIC_MANAGER"
            ])
        );
        assert_eq!(installed["fingerprint"].as_str().unwrap().len(), 64);
    }
    let unknown = client
        .get_configure_switch_certificate_job_status(
            pb::GetConfigureSwitchCertificateJobStatusRequest {
                job_id: "nope".into(),
            },
        )
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (unknown.status, unknown.message.as_str()),
        (pb::ReturnCode::Failure as i32, "job nope not found")
    );
    let no_services = client
        .configure_switch_certificate(pb::ConfigureSwitchCertificateRequest {
            nodes: Some(pb::NodeSet {
                nodes: vec![switch("switch-07")],
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        (no_services.code(), no_services.message()),
        (tonic::Code::InvalidArgument, "services is required")
    );
    rms.stop().await;
}
