//! Hostile values (issue 14, item 6), on both stores: a NUL character, a
//! text longer than its limit, an external id that would overflow
//! PostgreSQL's index, a run name over its column, 10,000 copies of one
//! target. Refused identically before any store sees them —
//! INVALID_ARGUMENT naming the field and the limit, never the database's
//! text — and nothing is written.

use rackflow_api::v1 as pb;
use rackflow_testkit::both_stores;
use rackflow_testkit::{Backend, TestServer, rack, run_request};
use tonic::Code;

both_stores!(
    hostile_values_are_refused_naming_the_field_and_write_nothing,
    a_run_name_longer_than_its_column_is_the_callers_error,
    a_target_repeated_ten_thousand_times_is_one_target,
    a_page_of_large_items_is_cut_to_fit_one_reply
);

fn assert_refused(status: &tonic::Status, what: &str) {
    assert!(
        matches!(
            status.code(),
            Code::InvalidArgument | Code::AlreadyExists | Code::NotFound
        ),
        "{what}: {status:?}"
    );
    let text = status.message().to_lowercase();
    for leak in [
        "utf8",
        "sqlx",
        "syntax",
        "constraint",
        "index row",
        "0x00",
        "/tmp",
        "sqlite",
        "postgres",
    ] {
        assert!(
            !text.contains(leak),
            "{what}: the answer leaks {leak:?}: {status:?}"
        );
    }
}

async fn rack_count(server: &mut TestServer) -> i32 {
    server
        .client
        .get_list_of_racks(pb::GetListOfRacksRequest::default())
        .await
        .expect("list")
        .into_inner()
        .total
}

async fn hostile_values_are_refused_naming_the_field_and_write_nothing(backend: Backend) {
    let Some(mut server) = TestServer::start(backend).await else {
        return;
    };
    let before = rack_count(&mut server).await;
    let mut cases: Vec<(&str, pb::Rack, &str)> = Vec::new();
    let mut nul = rack(1, None, 1);
    nul.info.as_mut().expect("info").name = "rack\0one".into();
    cases.push((
        "a NUL in a rack name",
        nul,
        "rack.info.name: contains a NUL character",
    ));
    let mut huge_key = rack(3, None, 1);
    // Random text: PostgreSQL compresses a repetitive one under the limit.
    huge_key.external_id = (0..700)
        .map(|_| uuid::Uuid::new_v4().simple().to_string())
        .collect();
    cases.push((
        "a 22,400-character external id",
        huge_key,
        "rack.external_id: 22400 characters; at most 1024",
    ));
    let mut nul_component = rack(4, None, 1);
    nul_component.components[0].component_id = "c\0".into();
    cases.push((
        "a NUL in a component id",
        nul_component,
        "rack.components[0].component_id: contains a NUL character",
    ));
    for (what, rack, message) in cases {
        let status = server
            .client
            .create_expected_rack(pb::CreateExpectedRackRequest { rack: Some(rack) })
            .await
            .expect_err(what);
        assert_refused(&status, what);
        assert_eq!(status.code(), Code::InvalidArgument, "{what}");
        assert_eq!(status.message(), message, "{what}");
    }
    assert_eq!(
        rack_count(&mut server).await,
        before,
        "a refused rack wrote nothing"
    );
    // The same limits for the messages of the ImportRacks stream.
    let mut nul_import = rack(5, None, 1);
    nul_import.info.as_mut().expect("info").name = "bad\0".into();
    let status = server
        .extensions()
        .import_racks(tokio_stream::iter(vec![pb::ImportRacksRequest {
            racks: vec![nul_import],
        }]))
        .await
        .expect_err("a NUL in an imported rack");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(
        status.message(),
        "batch 1: racks[0].info.name: contains a NUL character"
    );
    assert_eq!(
        rack_count(&mut server).await,
        before,
        "a refused import wrote nothing"
    );
    server.stop().await;
}

async fn a_run_name_longer_than_its_column_is_the_callers_error(backend: Backend) {
    let Some(mut server) = TestServer::start(backend).await else {
        return;
    };
    rackflow_testkit::fixture_fleet(&mut server.client, 2).await;
    for (what, name) in [("a 300-character run name", "r".repeat(300))] {
        let status = server
            .client
            .create_operation_run(run_request(&name, 100, "s", "o", 1))
            .await
            .expect_err(what);
        assert_refused(&status, what);
    }
    let runs = server
        .client
        .list_operation_runs(pb::ListOperationRunsRequest::default())
        .await
        .expect("list runs")
        .into_inner();
    assert_eq!(runs.total, 0, "a refused run wrote nothing");
    server.stop().await;
}

async fn a_target_repeated_ten_thousand_times_is_one_target(backend: Backend) {
    let Some(mut server) = TestServer::start(backend).await else {
        return;
    };
    rackflow_testkit::fixture_fleet(&mut server.client, 1).await;
    let one = pb::ComponentTarget {
        identifier: Some(pb::component_target::Identifier::External(
            pb::ExternalRef {
                r#type: pb::ComponentType::Compute as i32,
                id: "r-0001-compute-00".into(),
            },
        )),
    };
    let started = std::time::Instant::now();
    let reply = server
        .client
        .power_reset_rack(pb::PowerResetRackRequest {
            target_spec: Some(pb::OperationTargetSpec {
                targets: Some(pb::operation_target_spec::Targets::Components(
                    pb::ComponentTargets {
                        targets: vec![one; 10_000],
                    },
                )),
            }),
            ..Default::default()
        })
        .await
        .expect("power reset")
        .into_inner();
    let took = started.elapsed();
    assert_eq!(reply.task_ids.len(), 1);
    let task = server
        .client
        .get_tasks_by_i_ds(pb::GetTasksByIDsRequest {
            task_ids: reply.task_ids.clone(),
        })
        .await
        .expect("task")
        .into_inner()
        .tasks
        .remove(0);
    assert_eq!(task.component_uuids.len(), 1, "{task:#?}");
    eprintln!("10,000 repeated targets answered in {took:?}");
    server.stop().await;
}

/// Large racks listed with their components: the page is cut to what one
/// reply may carry (tonic's 4 MiB), `total` stays the whole count, and the
/// client pages on by offset — no reply the client cannot decode.
async fn a_page_of_large_items_is_cut_to_fit_one_reply(backend: Backend) {
    let Some(mut server) = TestServer::start(backend).await else {
        return;
    };
    for n in 1..=3u32 {
        let mut big = rack(n, None, 0);
        big.components = (0..900)
            .map(|i| pb::Component {
                r#type: pb::ComponentType::Compute as i32,
                info: Some(pb::DeviceInfo {
                    name: format!("{i:04}-{}", "n".repeat(900)),
                    serial_number: format!("{n}-{i}-{}", "s".repeat(900)),
                    ..Default::default()
                }),
                component_id: format!("r{n}-c{i}"),
                firmware_version: "1.0.0".into(),
                ..Default::default()
            })
            .collect();
        server
            .client
            .create_expected_rack(pb::CreateExpectedRackRequest { rack: Some(big) })
            .await
            .expect("a 1.6 MB rack");
    }
    let mut seen = 0;
    loop {
        let page = server
            .client
            .get_list_of_racks(pb::GetListOfRacksRequest {
                with_components: true,
                pagination: Some(pb::Pagination {
                    offset: seen,
                    limit: 100,
                }),
                ..Default::default()
            })
            .await
            .expect("a page that fits one reply")
            .into_inner();
        assert_eq!(page.total, 3);
        assert!(
            !page.racks.is_empty() && page.racks.len() < 3,
            "{}",
            page.racks.len()
        );
        assert!(page.racks.iter().all(|r| r.components.len() == 900));
        seen += page.racks.len() as i32;
        if seen >= page.total {
            break;
        }
    }
    assert_eq!(seen, 3);
    server.stop().await;
}
