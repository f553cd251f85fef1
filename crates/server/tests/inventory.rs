//! Inventory RPCs, Version, health and reflection through the real gRPC API,
//! on SQLite and PostgreSQL.

// Test helpers may unwrap: the panic is the failure report (the workspace
// denies unwrap_used for code input can reach).
#![allow(clippy::unwrap_used)]

use rackflow_testkit as common;
use rackflow_testkit::both_stores;

use common::{Backend, TestServer, rack, uuid};
use rackflow_api::v1 as pb;
use tonic::Code;
use uuid::Uuid;

both_stores!(
    racks_create_get_list_delete,
    import_racks_in_batches,
    components_add_list_patch,
    version_health_and_reflection,
    lookups_by_serial_and_component_id,
    rack_patch_reports_what_changed,
    delete_purge_and_reimport_a_rack,
    components_delete_and_purge,
    nvl_domains_create_attach_detach_and_list,
    listings_take_wildcards_and_order_by,
);

async fn racks_create_get_list_delete(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    let mut extensions = s.extensions();
    let c = &mut s.client;
    let id = c
        .create_expected_rack(pb::CreateExpectedRackRequest {
            rack: Some(rack(1, None, 3)),
        })
        .await
        .expect("create")
        .into_inner()
        .id
        .expect("id");
    c.create_expected_rack(pb::CreateExpectedRackRequest {
        rack: Some(rack(2, None, 1)),
    })
    .await
    .expect("second");

    // Duplicate external id: AlreadyExists naming the field, nothing written.
    let mut dup = rack(3, None, 1);
    dup.external_id = "r-0001".into();
    let err = c
        .create_expected_rack(pb::CreateExpectedRackRequest { rack: Some(dup) })
        .await
        .expect_err("dup");
    assert_eq!(err.code(), Code::AlreadyExists);
    assert!(err.message().contains("external_id"), "{}", err.message());
    // Bad input names the field.
    let err = c
        .create_expected_rack(pb::CreateExpectedRackRequest { rack: None })
        .await
        .expect_err("no rack");
    assert_eq!(
        (err.code(), err.message()),
        (Code::InvalidArgument, "rack is required")
    );
    let mut nameless = rack(4, None, 1);
    nameless.info.as_mut().unwrap().name = " ".into();
    let err = c
        .create_expected_rack(pb::CreateExpectedRackRequest {
            rack: Some(nameless),
        })
        .await
        .expect_err("no name");
    assert_eq!(
        (err.code(), err.message()),
        (Code::InvalidArgument, "rack.info.name is required")
    );
    let mut bad_type = rack(5, None, 1);
    bad_type.components[0].r#type = 0;
    let err = c
        .create_expected_rack(pb::CreateExpectedRackRequest {
            rack: Some(bad_type),
        })
        .await
        .expect_err("bad type");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().starts_with("rack.components[0].type"),
        "{}",
        err.message()
    );

    let list = c
        .get_list_of_racks(pb::GetListOfRacksRequest::default())
        .await
        .expect("list")
        .into_inner();
    assert_eq!(list.total, 2);
    assert_eq!(
        list.racks
            .iter()
            .map(|r| r.info.as_ref().unwrap().name.clone())
            .collect::<Vec<_>>(),
        vec!["rack-001", "rack-002"]
    );
    assert!(
        list.racks[0].components.is_empty(),
        "components only when asked"
    );

    // By UUID and by external id, with components.
    for key in [
        id.clone(),
        pb::Uuid {
            id: "r-0001".into(),
        },
    ] {
        let got = c
            .get_rack_info_by_id(pb::GetRackInfoByIdRequest {
                id: Some(key),
                with_components: true,
            })
            .await
            .expect("get")
            .into_inner()
            .rack
            .unwrap();
        assert_eq!(got.info.as_ref().unwrap().id, Some(id.clone()));
        assert_eq!(got.external_id, "r-0001");
        assert_eq!(got.components.len(), 5);
        assert_eq!(got.location.as_ref().unwrap().datacenter, "dc1");
        assert!(
            got.components
                .iter()
                .all(|c| c.rack_external_id == "r-0001")
        );
    }
    let err = c
        .get_rack_info_by_id(pb::GetRackInfoByIdRequest {
            id: Some(pb::Uuid {
                id: "r-9999".into(),
            }),
            with_components: false,
        })
        .await
        .expect_err("nf");
    assert_eq!(err.code(), Code::NotFound);

    // Filter by name, pagination, then soft delete.
    let by_name = c
        .get_list_of_racks(pb::GetListOfRacksRequest {
            filters: vec![pb::Filter {
                field: Some(pb::filter::Field::RackField(
                    pb::RackFilterField::Name as i32,
                )),
                query_info: Some(pb::StringQueryInfo {
                    patterns: vec!["rack-002".into()],
                    ..Default::default()
                }),
            }],
            with_components: true,
            ..Default::default()
        })
        .await
        .expect("by name")
        .into_inner();
    assert_eq!((by_name.total, by_name.racks[0].components.len()), (1, 3));
    let page = c
        .get_list_of_racks(pb::GetListOfRacksRequest {
            pagination: Some(pb::Pagination {
                offset: 1,
                limit: 1,
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((page.total, page.racks.len()), (2, 1));
    let err = c
        .get_list_of_racks(pb::GetListOfRacksRequest {
            pagination: Some(pb::Pagination {
                offset: -1,
                limit: 1,
            }),
            ..Default::default()
        })
        .await
        .expect_err("negative offset");
    assert_eq!(
        (err.code(), err.message()),
        (
            Code::InvalidArgument,
            "pagination.offset must not be negative"
        )
    );

    c.delete_rack(pb::DeleteRackRequest {
        id: Some(id.clone()),
    })
    .await
    .expect("delete");
    let err = c
        .delete_rack(pb::DeleteRackRequest {
            id: Some(id.clone()),
        })
        .await
        .expect_err("twice");
    assert_eq!(err.code(), Code::NotFound);
    let list = c
        .get_list_of_racks(pb::GetListOfRacksRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.total, 1, "deleted racks are not listed");
    // A deleted rack leaves the default scope of new runs.
    let preview = extensions
        .preview_operation_run(common::run_request("after-delete", 100, "s", "o", 1))
        .await
        .expect("preview")
        .into_inner();
    assert_eq!(preview.targets.len(), 1);
    assert_eq!(preview.targets[0].rack_external_id, "r-0002");
    s.stop().await;
}

async fn import_racks_in_batches(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    let mut extensions = s.extensions();
    s.client
        .create_expected_rack(pb::CreateExpectedRackRequest {
            rack: Some(rack(2, None, 1)),
        })
        .await
        .expect("create");
    let batches = vec![
        pb::ImportRacksRequest {
            racks: (1..=3).map(|n| rack(n, None, 2)).collect(),
        },
        pb::ImportRacksRequest {
            racks: (4..=5).map(|n| rack(n, None, 2)).collect(),
        },
    ];
    let answer = extensions
        .import_racks(tokio_stream::iter(batches.clone()))
        .await
        .expect("import")
        .into_inner();
    assert_eq!((answer.created, answer.skipped), (4, 1));
    let created: Vec<(String, bool)> = answer
        .racks
        .iter()
        .map(|r| (r.external_id.clone(), r.created))
        .collect();
    assert_eq!(
        created,
        [
            ("r-0001".to_string(), true),
            ("r-0002".to_string(), false),
            ("r-0003".to_string(), true),
            ("r-0004".to_string(), true),
            ("r-0005".to_string(), true),
        ]
    );
    // Imported racks read back with their components.
    let id = answer.racks[3].id.clone();
    let got = s
        .client
        .get_rack_info_by_id(pb::GetRackInfoByIdRequest {
            id,
            with_components: true,
        })
        .await
        .expect("get")
        .into_inner()
        .rack
        .expect("rack");
    assert_eq!(got.components.len(), 4);
    assert_eq!(got.external_id, "r-0004");

    // Again: nothing new.
    let again = extensions
        .import_racks(tokio_stream::iter(batches))
        .await
        .expect("again")
        .into_inner();
    assert_eq!((again.created, again.skipped), (0, 5));

    // A rack that does not validate is named by its place in the stream;
    // its batch is not written, the batch before it is.
    let mut nameless = rack(8, None, 1);
    nameless.info.as_mut().unwrap().name = String::new();
    let err = extensions
        .import_racks(tokio_stream::iter(vec![
            pb::ImportRacksRequest {
                racks: vec![rack(6, None, 1)],
            },
            pb::ImportRacksRequest {
                racks: vec![rack(7, None, 1), nameless],
            },
        ]))
        .await
        .expect_err("nameless");
    assert_eq!(
        (err.code(), err.message()),
        (
            Code::InvalidArgument,
            r#"racks[2] (external id "r-0008"): rack.info.name is required"#
        )
    );
    let exists = |ext: &str| pb::GetRackInfoByIdRequest {
        id: Some(pb::Uuid { id: ext.into() }),
        with_components: false,
    };
    s.client
        .get_rack_info_by_id(exists("r-0006"))
        .await
        .expect("r-0006 imported");
    let err = s
        .client
        .get_rack_info_by_id(exists("r-0007"))
        .await
        .expect_err("r-0007");
    assert_eq!(err.code(), Code::NotFound);

    // Batches are bounded.
    let err = extensions
        .import_racks(tokio_stream::iter(vec![pb::ImportRacksRequest {
            racks: (0..1001).map(|n| rack(100 + n, None, 0)).collect(),
        }]))
        .await
        .expect_err("too many");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("at most 1000 racks"),
        "{}",
        err.message()
    );
}

async fn components_add_list_patch(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    let c = &mut s.client;
    let rack_id = c
        .create_expected_rack(pb::CreateExpectedRackRequest {
            rack: Some(rack(1, None, 2)),
        })
        .await
        .unwrap()
        .into_inner()
        .id
        .unwrap();
    let added = c
        .add_component(pb::AddComponentRequest {
            component: Some(pb::Component {
                r#type: pb::ComponentType::Torswitch as i32,
                info: Some(pb::DeviceInfo {
                    name: "tor-1".into(),
                    ..Default::default()
                }),
                component_id: "tor-ext-1".into(),
                rack_id: Some(rack_id.clone()),
                bmcs: vec![pb::BmcInfo {
                    r#type: 1,
                    mac_address: "AA-BB-CC-00-00-01".into(),
                    ip_address: Some("10.0.0.9".into()),
                }],
                ..Default::default()
            }),
        })
        .await
        .expect("add")
        .into_inner()
        .component
        .unwrap();
    assert_eq!(
        added.bmcs[0].mac_address, "aa:bb:cc:00:00:01",
        "MACs are normalised"
    );
    let component_id = added.info.as_ref().unwrap().id.clone().unwrap();

    let err = c
        .add_component(pb::AddComponentRequest {
            component: Some(pb::Component {
                r#type: 1,
                rack_id: Some(uuid(Uuid::new_v4())),
                ..Default::default()
            }),
        })
        .await
        .expect_err("unknown rack");
    assert_eq!(err.code(), Code::NotFound);
    let err = c
        .add_component(pb::AddComponentRequest {
            component: Some(pb::Component {
                r#type: 1,
                bmcs: vec![pb::BmcInfo {
                    r#type: 1,
                    mac_address: "nope".into(),
                    ip_address: None,
                }],
                ..Default::default()
            }),
        })
        .await
        .expect_err("bad mac");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("component.bmcs[0].mac_address"),
        "{}",
        err.message()
    );

    let list = |filters: Vec<pb::Filter>, spec: Option<pb::OperationTargetSpec>| {
        pb::GetComponentsRequest {
            target_spec: spec,
            filters,
            pagination: None,
            order_by: None,
            leak_statuses: Vec::new(),
        }
    };
    let all = c
        .get_components(list(vec![], None))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.total, 5);
    let tors = c
        .get_components(list(
            vec![pb::Filter {
                field: Some(pb::filter::Field::ComponentField(
                    pb::ComponentFilterField::Type as i32,
                )),
                query_info: Some(pb::StringQueryInfo {
                    patterns: vec!["torswitch".into()],
                    ..Default::default()
                }),
            }],
            None,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(tors.total, 1);
    let by_rack = c
        .get_components(list(
            vec![],
            Some(pb::OperationTargetSpec {
                targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
                    targets: vec![pb::RackTarget {
                        identifier: Some(pb::rack_target::Identifier::ExternalId("r-0001".into())),
                        component_types: vec![pb::ComponentType::Compute as i32],
                    }],
                })),
            }),
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(by_rack.total, 2);

    let patched = c
        .patch_component(pb::PatchComponentRequest {
            id: Some(component_id.clone()),
            firmware_version: Some("9.9.9".into()),
            position: Some(pb::RackPosition {
                slot_id: 7,
                tray_idx: 8,
                host_id: 9,
            }),
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["position.slot_id".into()],
            }),
            bmcs: vec![pb::BmcInfo {
                r#type: 1,
                mac_address: "aa:bb:cc:00:00:01".into(),
                ip_address: Some("10.0.0.10".into()),
            }],
            ..Default::default()
        })
        .await
        .expect("patch")
        .into_inner()
        .component
        .unwrap();
    assert_eq!(patched.firmware_version, "9.9.9");
    let pos = patched.position.unwrap();
    assert_eq!(
        (pos.slot_id, pos.tray_idx, pos.host_id),
        (7, 0, 0),
        "only masked fields change"
    );
    assert_eq!(patched.bmcs.len(), 1);
    assert_eq!(patched.bmcs[0].ip_address.as_deref(), Some("10.0.0.10"));
    let err = c
        .patch_component(pb::PatchComponentRequest {
            id: Some(uuid(Uuid::new_v4())),
            firmware_version: Some("x".into()),
            ..Default::default()
        })
        .await
        .expect_err("unknown component");
    assert_eq!(err.code(), Code::NotFound);
    let err = c
        .patch_component(pb::PatchComponentRequest {
            id: Some(component_id),
            position: Some(pb::RackPosition::default()),
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["name".into()],
            }),
            ..Default::default()
        })
        .await
        .expect_err("bad mask");
    assert_eq!(err.code(), Code::InvalidArgument);
    s.stop().await;
}

async fn version_health_and_reflection(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    let v = s
        .client
        .version(pb::VersionRequest {})
        .await
        .expect("version")
        .into_inner();
    assert_eq!(v.version, env!("CARGO_PKG_VERSION"));

    let channel = tonic::transport::Channel::from_shared(format!("http://{}", s.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    for service in ["", "v1.Flow"] {
        let status = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("health")
            .into_inner()
            .status;
        assert_eq!(
            status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32,
            "service {service:?}"
        );
    }

    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let mut reflection = ServerReflectionClient::new(channel);
    let request = tonic_reflection::pb::v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut stream = reflection
        .server_reflection_info(tokio_stream::iter(vec![request]))
        .await
        .expect("reflection")
        .into_inner();
    let response = stream
        .message()
        .await
        .expect("message")
        .expect("a response");
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("unexpected reflection response");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    assert!(names.contains(&"v1.Flow".to_string()), "{names:?}");
    assert!(
        names.contains(&"grpc.health.v1.Health".to_string()),
        "{names:?}"
    );
    s.stop().await;
}

/// `GetRackInfoBySerial`, `GetComponentInfoByID`, `GetComponentInfoBySerial`:
/// found with and without their rack / components, NotFound naming what was
/// asked, InvalidArgument for a missing serial or id, and a deleted rack's
/// components no longer found.
async fn lookups_by_serial_and_component_id(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    let c = &mut s.client;
    let rack_id = c
        .create_expected_rack(pb::CreateExpectedRackRequest {
            rack: Some(rack(1, None, 2)),
        })
        .await
        .expect("create")
        .into_inner()
        .id
        .expect("id");
    let serial = |manufacturer: &str, serial: &str| {
        Some(pb::DeviceSerialInfo {
            manufacturer: manufacturer.into(),
            serial_number: serial.into(),
        })
    };

    let found = c
        .get_rack_info_by_serial(pb::GetRackInfoBySerialRequest {
            serial_info: serial("NVIDIA", "RSN-00001"),
            with_components: true,
        })
        .await
        .expect("rack by serial")
        .into_inner()
        .rack
        .expect("rack");
    assert_eq!(
        found.info.as_ref().and_then(|i| i.id.clone()),
        Some(rack_id.clone())
    );
    assert_eq!(found.components.len(), 4);
    let bare = c
        .get_rack_info_by_serial(pb::GetRackInfoBySerialRequest {
            serial_info: serial("NVIDIA", "RSN-00001"),
            with_components: false,
        })
        .await
        .expect("rack by serial")
        .into_inner()
        .rack
        .expect("rack");
    assert!(bare.components.is_empty());
    let err = c
        .get_rack_info_by_serial(pb::GetRackInfoBySerialRequest {
            serial_info: serial("Other", "RSN-00001"),
            with_components: false,
        })
        .await
        .expect_err("another maker");
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(
        err.message(),
        "rack with manufacturer \"Other\" and serial number \"RSN-00001\" not found"
    );
    for (info, message) in [
        (None, "serial_info is required"),
        (
            serial("NVIDIA", " "),
            "serial_info.serial_number is required",
        ),
    ] {
        let err = c
            .get_rack_info_by_serial(pb::GetRackInfoBySerialRequest {
                serial_info: info,
                with_components: false,
            })
            .await
            .expect_err("invalid");
        assert_eq!(
            (err.code(), err.message()),
            (Code::InvalidArgument, message)
        );
    }

    // A component by serial, with its rack; then by its id.
    let by_serial = c
        .get_component_info_by_serial(pb::GetComponentInfoBySerialRequest {
            serial_info: serial("NVIDIA", "SN-r-0001-compute-01"),
            with_rack: true,
        })
        .await
        .expect("component by serial")
        .into_inner();
    let component = by_serial.component.expect("component");
    assert_eq!(component.component_id, "r-0001-compute-01");
    assert_eq!(component.rack_external_id, "r-0001");
    let with_rack = by_serial.rack.expect("rack");
    assert_eq!(with_rack.info.and_then(|i| i.id), Some(rack_id.clone()));
    assert!(with_rack.components.is_empty());
    let id = component.info.and_then(|i| i.id).expect("component id");
    let by_id = c
        .get_component_info_by_id(pb::GetComponentInfoByIdRequest {
            id: Some(id.clone()),
            with_rack: false,
        })
        .await
        .expect("component by id")
        .into_inner();
    assert_eq!(
        by_id.component.map(|c| c.component_id).as_deref(),
        Some("r-0001-compute-01")
    );
    assert!(by_id.rack.is_none(), "not asked for");
    let err = c
        .get_component_info_by_serial(pb::GetComponentInfoBySerialRequest {
            serial_info: serial("NVIDIA", "nope"),
            with_rack: false,
        })
        .await
        .expect_err("unknown serial");
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(
        err.message(),
        "component with manufacturer \"NVIDIA\" and serial number \"nope\" not found"
    );
    let err = c
        .get_component_info_by_id(pb::GetComponentInfoByIdRequest {
            id: None,
            with_rack: false,
        })
        .await
        .expect_err("no id");
    assert_eq!(
        (err.code(), err.message()),
        (Code::InvalidArgument, "component id is required")
    );

    // A deleted rack takes its components with it.
    c.delete_rack(pb::DeleteRackRequest { id: Some(rack_id) })
        .await
        .expect("delete");
    let err = c
        .get_component_info_by_id(pb::GetComponentInfoByIdRequest {
            id: Some(id.clone()),
            with_rack: false,
        })
        .await
        .expect_err("deleted");
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(err.message(), format!("component {} not found", id.id));
    let err = c
        .get_rack_info_by_serial(pb::GetRackInfoBySerialRequest {
            serial_info: serial("NVIDIA", "RSN-00001"),
            with_components: false,
        })
        .await
        .expect_err("deleted rack");
    assert_eq!(err.code(), Code::NotFound);
}

/// Creates `rack`; returns its id.
async fn create_rack(c: &mut Client, rack: pb::Rack) -> pb::Uuid {
    c.create_expected_rack(pb::CreateExpectedRackRequest { rack: Some(rack) })
        .await
        .expect("create")
        .into_inner()
        .id
        .expect("id")
}

/// The rack `id` (without its components).
async fn get_rack(c: &mut Client, id: &pb::Uuid) -> pb::Rack {
    c.get_rack_info_by_id(pb::GetRackInfoByIdRequest {
        id: Some(id.clone()),
        with_components: false,
    })
    .await
    .expect("get")
    .into_inner()
    .rack
    .expect("rack")
}

type Client = common::FlowClient<tonic::transport::Channel>;

async fn total_racks(c: &mut Client) -> i32 {
    c.get_list_of_racks(pb::GetListOfRacksRequest::default())
        .await
        .expect("list")
        .into_inner()
        .total
}

/// Issue 32 item 1: PatchRack changes name, description and location and
/// answers a JSON report of what changed; the rest of the message is left
/// alone; bad input and unknown racks are refused without a write.
async fn rack_patch_reports_what_changed(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    let c = &mut s.client;
    let id = create_rack(c, rack(1, None, 1)).await;
    let before = get_rack(c, &id).await;
    let mut patched = before.clone();
    let info = patched.info.as_mut().expect("info");
    info.name = "rack-renamed".into();
    info.description = Some("moved to hall B".into());
    info.manufacturer = "ignored".into();
    patched.location = Some(pb::Location {
        region: "eu".into(),
        datacenter: "dc2".into(),
        room: "B".into(),
        position: "7".into(),
    });
    let report = c
        .patch_rack(pb::PatchRackRequest {
            rack: Some(patched),
        })
        .await
        .expect("patch")
        .into_inner()
        .report;
    let report: serde_json::Value = serde_json::from_str(&report).expect("JSON report");
    assert_eq!(report["rack_id"], id.id);
    assert_eq!(
        report["changed"]["name"]["from"],
        before.info.as_ref().unwrap().name
    );
    assert_eq!(report["changed"]["name"]["to"], "rack-renamed");
    assert_eq!(report["changed"]["description"]["to"], "moved to hall B");
    assert_eq!(report["changed"]["location"]["to"]["datacenter"], "dc2");
    assert!(report["changed"].get("manufacturer").is_none(), "{report}");
    let after = get_rack(c, &id).await;
    let info = after.info.as_ref().unwrap();
    assert_eq!(info.name, "rack-renamed");
    assert_eq!(
        info.manufacturer,
        before.info.as_ref().unwrap().manufacturer
    );
    assert_eq!(after.location.as_ref().unwrap().room, "B");

    // The same patch again changes nothing and says so.
    let again = c
        .patch_rack(pb::PatchRackRequest {
            rack: Some(after.clone()),
        })
        .await
        .expect("patch again")
        .into_inner()
        .report;
    let again: serde_json::Value = serde_json::from_str(&again).unwrap();
    assert_eq!(again["changed"], serde_json::json!({}));

    // Refusals.
    let err = c
        .patch_rack(pb::PatchRackRequest { rack: None })
        .await
        .expect_err("no rack");
    assert_eq!(
        (err.code(), err.message()),
        (Code::InvalidArgument, "rack is required")
    );
    let err = c
        .patch_rack(pb::PatchRackRequest {
            rack: Some(pb::Rack::default()),
        })
        .await
        .expect_err("no id");
    assert_eq!(
        (err.code(), err.message()),
        (Code::InvalidArgument, "rack.info.id is required")
    );
    let missing = Uuid::new_v4();
    let err = c
        .patch_rack(pb::PatchRackRequest {
            rack: Some(pb::Rack {
                info: Some(pb::DeviceInfo {
                    id: Some(uuid(missing)),
                    name: "x".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        })
        .await
        .expect_err("unknown rack");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    assert!(err.message().contains(&missing.to_string()), "{err:?}");
}

/// Issue 32 item 1: purge only follows a delete (before it: refused,
/// nothing changed); a second purge is NotFound; a deleted rack keeps its
/// external id reserved until purged; after the purge the same external id
/// imports again.
async fn delete_purge_and_reimport_a_rack(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    let c = &mut s.client;
    let id = create_rack(c, rack(1, None, 2)).await;
    let err = c
        .purge_rack(pb::PurgeRackRequest {
            id: Some(id.clone()),
        })
        .await
        .expect_err("purge before delete");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("DeleteRack first"), "{err:?}");
    assert_eq!(total_racks(c).await, 1, "the refused purge changed nothing");

    c.delete_rack(pb::DeleteRackRequest {
        id: Some(id.clone()),
    })
    .await
    .expect("delete");
    // Deleted but not purged: its external id is still taken.
    let err = c
        .create_expected_rack(pb::CreateExpectedRackRequest {
            rack: Some(rack(1, None, 2)),
        })
        .await
        .expect_err("external id still reserved");
    assert_eq!(err.code(), Code::AlreadyExists, "{err:?}");
    assert_eq!(
        err.message(),
        "rack external_id \"r-0001\" is held by a deleted rack: purge it (PurgeRack) to use it again"
    );

    c.purge_rack(pb::PurgeRackRequest {
        id: Some(id.clone()),
    })
    .await
    .expect("purge");
    let err = c
        .purge_rack(pb::PurgeRackRequest { id: Some(id) })
        .await
        .expect_err("second purge");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    let err = c
        .purge_rack(pb::PurgeRackRequest { id: None })
        .await
        .expect_err("no id");
    assert_eq!(
        (err.code(), err.message()),
        (Code::InvalidArgument, "rack id is required")
    );

    // Re-import under the same external id (and serial number).
    c.create_expected_rack(pb::CreateExpectedRackRequest {
        rack: Some(rack(1, None, 2)),
    })
    .await
    .expect("re-import after purge");
    assert_eq!(total_racks(c).await, 1);
}

/// Issue 32 item 1: DeleteComponent hides a component from lookups and
/// listings; purge only follows a delete; a second purge is NotFound.
async fn components_delete_and_purge(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    let c = &mut s.client;
    let rack_id = create_rack(c, rack(1, None, 2)).await;
    let list = |c: &mut Client| {
        let mut c = c.clone();
        let rack_id = rack_id.clone();
        async move {
            c.get_components(pb::GetComponentsRequest {
                target_spec: Some(pb::OperationTargetSpec {
                    targets: Some(pb::operation_target_spec::Targets::Racks(pb::RackTargets {
                        targets: vec![pb::RackTarget {
                            identifier: Some(pb::rack_target::Identifier::Id(rack_id)),
                            component_types: Vec::new(),
                        }],
                    })),
                }),
                ..Default::default()
            })
            .await
            .expect("components")
            .into_inner()
        }
    };
    let before = list(c).await;
    let victim = before.components[0]
        .info
        .as_ref()
        .unwrap()
        .id
        .clone()
        .unwrap();
    let err = c
        .purge_component(pb::PurgeComponentRequest {
            id: Some(victim.clone()),
        })
        .await
        .expect_err("purge before delete");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("DeleteComponent first"), "{err:?}");

    c.delete_component(pb::DeleteComponentRequest {
        id: Some(victim.clone()),
    })
    .await
    .expect("delete");
    let after = list(c).await;
    assert_eq!(after.total, before.total - 1);
    assert!(
        after
            .components
            .iter()
            .all(|x| x.info.as_ref().unwrap().id.as_ref() != Some(&victim))
    );
    let err = c
        .get_component_info_by_id(pb::GetComponentInfoByIdRequest {
            id: Some(victim.clone()),
            with_rack: false,
        })
        .await
        .expect_err("hidden from lookups");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    let err = c
        .delete_component(pb::DeleteComponentRequest {
            id: Some(victim.clone()),
        })
        .await
        .expect_err("second delete");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");

    c.purge_component(pb::PurgeComponentRequest {
        id: Some(victim.clone()),
    })
    .await
    .expect("purge");
    let err = c
        .purge_component(pb::PurgeComponentRequest { id: Some(victim) })
        .await
        .expect_err("second purge");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
}

fn by_name(name: &str) -> pb::Identifier {
    pb::Identifier {
        id: None,
        name: name.into(),
    }
}

fn by_id(id: &pb::Uuid) -> pb::Identifier {
    pb::Identifier {
        id: Some(id.clone()),
        name: String::new(),
    }
}

async fn domain_racks(c: &mut Client, domain: pb::Identifier) -> Vec<String> {
    c.get_racks_for_nvl_domain(pb::GetRacksForNvlDomainRequest {
        nvl_domain_identifier: Some(domain),
    })
    .await
    .expect("racks of domain")
    .into_inner()
    .racks
    .iter()
    .map(|r| r.info.as_ref().unwrap().name.clone())
    .collect()
}

/// Issue 32 item 2: NVLink domains — created with a unique name, racks
/// attached by id or name (attaching moves a rack), detached, listed with
/// the reference's name query; unknown racks or domains are NotFound and
/// change nothing.
async fn nvl_domains_create_attach_detach_and_list(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    let c = &mut s.client;
    let mut racks = Vec::new();
    for n in 1..=3 {
        racks.push(create_rack(c, rack(n, None, 1)).await);
    }
    let create = |name: &str| pb::CreateNvlDomainRequest {
        nvl_domain: Some(pb::NvlDomain {
            identifier: Some(by_name(name)),
            external_id: Some(format!("ext-{name}")),
            nmxc_cluster_id: Some("nmxc-1".into()),
        }),
    };
    let a = c
        .create_nvl_domain(create("nvl-a"))
        .await
        .expect("create a")
        .into_inner()
        .id
        .expect("id");
    c.create_nvl_domain(create("nvl-b"))
        .await
        .expect("create b");
    let err = c
        .create_nvl_domain(create("nvl-a"))
        .await
        .expect_err("duplicate name");
    assert_eq!(err.code(), Code::AlreadyExists, "{err:?}");
    assert!(err.message().contains("nvl-a"), "{err:?}");
    let err = c
        .create_nvl_domain(pb::CreateNvlDomainRequest {
            nvl_domain: Some(pb::NvlDomain::default()),
        })
        .await
        .expect_err("no name");
    assert_eq!(
        (err.code(), err.message()),
        (
            Code::InvalidArgument,
            "nvl_domain.identifier.name is required"
        )
    );

    // Attach by id and by name; list the members by name.
    c.attach_racks_to_nvl_domain(pb::AttachRacksToNvlDomainRequest {
        nvl_domain_identifier: Some(by_id(&a)),
        rack_identifiers: vec![by_id(&racks[0]), by_name("rack-002")],
    })
    .await
    .expect("attach");
    assert_eq!(
        domain_racks(c, by_name("nvl-a")).await,
        ["rack-001", "rack-002"]
    );
    // Attaching moves a rack from its domain.
    c.attach_racks_to_nvl_domain(pb::AttachRacksToNvlDomainRequest {
        nvl_domain_identifier: Some(by_name("nvl-b")),
        rack_identifiers: vec![by_id(&racks[1])],
    })
    .await
    .expect("move");
    assert_eq!(domain_racks(c, by_id(&a)).await, ["rack-001"]);
    assert_eq!(domain_racks(c, by_name("nvl-b")).await, ["rack-002"]);
    let got = get_rack(c, &racks[1]).await;
    assert_eq!(got.nvl_domain_ids.len(), 1, "{got:?}");

    // An unknown rack: NotFound, and the known one beside it is not attached.
    let err = c
        .attach_racks_to_nvl_domain(pb::AttachRacksToNvlDomainRequest {
            nvl_domain_identifier: Some(by_name("nvl-a")),
            rack_identifiers: vec![by_id(&racks[2]), by_name("no-such-rack")],
        })
        .await
        .expect_err("unknown rack");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    assert!(err.message().contains("no-such-rack"), "{err:?}");
    assert_eq!(domain_racks(c, by_name("nvl-a")).await, ["rack-001"]);
    let err = c
        .get_racks_for_nvl_domain(pb::GetRacksForNvlDomainRequest {
            nvl_domain_identifier: Some(by_name("nvl-z")),
        })
        .await
        .expect_err("unknown domain");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    assert!(err.message().contains("nvl-z"), "{err:?}");
    let err = c
        .attach_racks_to_nvl_domain(pb::AttachRacksToNvlDomainRequest {
            nvl_domain_identifier: Some(by_name("nvl-a")),
            rack_identifiers: Vec::new(),
        })
        .await
        .expect_err("no racks");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");

    // Detach.
    c.detach_racks_from_nvl_domain(pb::DetachRacksFromNvlDomainRequest {
        rack_identifiers: vec![by_name("rack-001")],
    })
    .await
    .expect("detach");
    assert!(domain_racks(c, by_name("nvl-a")).await.is_empty());

    // The list: by name, the reference's wildcard rules, pagination.
    let list = |info: Option<pb::StringQueryInfo>, limit: i32| pb::GetListOfNvlDomainsRequest {
        info,
        pagination: Some(pb::Pagination { offset: 0, limit }),
    };
    let all = c
        .get_list_of_nvl_domains(list(None, 0))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(all.total, 2);
    let names: Vec<&str> = all
        .nvl_domains
        .iter()
        .map(|d| d.identifier.as_ref().unwrap().name.as_str())
        .collect();
    assert_eq!(names, ["nvl-a", "nvl-b"]);
    assert_eq!(all.nvl_domains[0].external_id.as_deref(), Some("ext-nvl-a"));
    assert_eq!(
        all.nvl_domains[0].nmxc_cluster_id.as_deref(),
        Some("nmxc-1")
    );
    let b = c
        .get_list_of_nvl_domains(list(
            Some(pb::StringQueryInfo {
                patterns: vec!["-b".into()],
                is_wildcard: true,
                use_or: false,
            }),
            0,
        ))
        .await
        .expect("wildcard")
        .into_inner();
    assert_eq!(b.total, 1);
    let page = c
        .get_list_of_nvl_domains(list(None, 1))
        .await
        .expect("page")
        .into_inner();
    assert_eq!((page.nvl_domains.len(), page.total), (1, 2));
}

/// Issue 32 item 4: the racks' and components' `StringQueryInfo` wildcards
/// and `order_by` (field and direction), as the reference's requests carry
/// them.
async fn listings_take_wildcards_and_order_by(backend: Backend) {
    let Some(mut s) = TestServer::start(backend).await else {
        return;
    };
    let c = &mut s.client;
    for n in [1, 2, 12] {
        c.create_expected_rack(pb::CreateExpectedRackRequest {
            rack: Some(rack(n, None, 1)),
        })
        .await
        .expect("create");
    }
    let names = |reply: pb::GetListOfRacksResponse| -> Vec<String> {
        reply
            .racks
            .iter()
            .map(|r| r.info.as_ref().unwrap().name.clone())
            .collect()
    };
    let by_name = |patterns: &[&str], wildcard: bool, direction: &str| pb::GetListOfRacksRequest {
        filters: vec![pb::Filter {
            field: Some(pb::filter::Field::RackField(
                pb::RackFilterField::Name as i32,
            )),
            query_info: Some(pb::StringQueryInfo {
                patterns: patterns.iter().map(|p| p.to_string()).collect(),
                is_wildcard: wildcard,
                use_or: false,
            }),
        }],
        order_by: Some(pb::OrderBy {
            field: Some(pb::order_by::Field::RackField(
                pb::RackOrderByField::Name as i32,
            )),
            direction: direction.into(),
        }),
        ..Default::default()
    };
    let wild = c
        .get_list_of_racks(by_name(&["rack-0"], true, "DESC"))
        .await
        .expect("wildcard")
        .into_inner();
    assert_eq!(names(wild), ["rack-012", "rack-002", "rack-001"]);
    let exact = c
        .get_list_of_racks(by_name(&["rack-001", "rack-012"], false, "asc"))
        .await
        .expect("exact")
        .into_inner();
    assert_eq!(names(exact), ["rack-001", "rack-012"]);
    let err = c
        .get_list_of_racks(by_name(&["x"], false, "sideways"))
        .await
        .expect_err("bad direction");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("ASC or DESC"), "{err:?}");

    // Components: a wildcard on the name, ordered by type, descending.
    let listed = c
        .get_components(pb::GetComponentsRequest {
            filters: vec![pb::Filter {
                field: Some(pb::filter::Field::ComponentField(
                    pb::ComponentFilterField::Name as i32,
                )),
                query_info: Some(pb::StringQueryInfo {
                    patterns: vec!["r-0012".into()],
                    is_wildcard: true,
                    use_or: false,
                }),
            }],
            order_by: Some(pb::OrderBy {
                field: Some(pb::order_by::Field::ComponentField(
                    pb::ComponentOrderByField::Type as i32,
                )),
                direction: "DESC".into(),
            }),
            ..Default::default()
        })
        .await
        .expect("components")
        .into_inner();
    assert!(listed.total > 0, "{listed:#?}");
    // Stored type names order as their wire numbers do (Compute <
    // NVSwitch < PowerShelf): descending, the numbers never rise.
    let types: Vec<i32> = listed.components.iter().map(|c| c.r#type).collect();
    assert!(types.windows(2).all(|w| w[0] >= w[1]), "{types:?}");
    assert!(types.first() > types.last(), "several types: {types:?}");
    for comp in &listed.components {
        assert!(
            comp.info.as_ref().unwrap().name.contains("r-0012"),
            "{comp:#?}"
        );
    }
}
