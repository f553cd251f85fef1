//! Snapshot tests (insta) of plans and of the main CLI screens, against a
//! real flow server in-process with fixed data: the fleet generator's
//! 6-rack fleet for seed 42 (what `rackflow fleet generate` prints), created
//! with fixed rack ids — the seeded selection and ordering hash rack ids, and
//! `fleet import` lets the server pick random ones, so a stable plan needs
//! fixed ids.
//!
//! What is still random or time-dependent is redacted before comparing:
//! fixed rack ids become `[rack-NN]`, any other UUID `[uuid]`, timestamps
//! `[time]`. Everything else must match the committed `.snap` files under
//! `tests/snapshots/`. Review a change with `cargo insta review` (or
//! `INSTA_UPDATE=always` and read the diff); with `CI` set insta never
//! writes snapshots, and a mismatch or a missing snapshot fails.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Server, rackflow};
use rackflow_api::v1;
use rackflow_api::v1::flow_client::FlowClient;

/// Redactions, applied in order.
const FILTERS: [(&str, &str); 4] = [
    // The fixed rack ids of `fixed_fleet` stay readable.
    (r"00000000-0000-0000-0000-0000000000(\d\d)", "[rack-$1]"),
    (
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "[uuid]",
    ),
    (
        r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2}| UTC)?",
        "[time]",
    ),
    // The server's address in hints such as "continue with: …".
    (r"127\.0\.0\.1:\d+", "[server]"),
];

macro_rules! assert_screen {
    ($name:expr, $text:expr) => {
        insta::with_settings!({
            filters => FILTERS.to_vec(),
            prepend_module_to_snapshot => false,
        }, {
            insta::assert_snapshot!($name, $text);
        })
    };
}

/// A server whose dispatcher does not drive runs: a created run and its
/// targets stay as planned, so their screens are fixed.
fn server() -> Server {
    Server::start_with(|config| config.dispatcher.enabled = false)
}

/// Creates the generator's 6-rack fleet for seed 42 with rack ids
/// `00000000-0000-0000-0000-0000000000NN` (NN = 01..=06).
fn fixed_fleet(addr: SocketAddr) {
    let fleet = rackflow_cli::fleet::generate(6, 42).expect("generate fleet");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut flow = FlowClient::connect(format!("http://{addr}"))
            .await
            .expect("connect");
        for (n, rack) in fleet.racks.iter().enumerate() {
            let mut rack = rackflow_cli::fleet::to_proto_rack(rack);
            rack.info.as_mut().expect("info").id = Some(v1::Uuid {
                id: format!("00000000-0000-0000-0000-{:012}", n + 1),
            });
            flow.create_expected_rack(v1::CreateExpectedRackRequest { rack: Some(rack) })
                .await
                .expect("create rack");
        }
    });
}

const CANARY: [&str; 17] = [
    "run",
    "create",
    "--name",
    "canary",
    "--percentage",
    "50",
    "--max-concurrent",
    "2",
    "--failure-rate",
    "10",
    "--phases",
    "count:1",
    "--seed",
    "s1",
    "--ordering-seed",
    "o1",
    "--component-types=compute",
];

const WIDE: [&str; 16] = [
    "run",
    "create",
    "--name",
    "wide",
    "--percentage",
    "100",
    "--max-concurrent",
    "3",
    "--failure-count",
    "2",
    "--phases",
    "equal:3",
    "--seed",
    "fleet-seed-7",
    "--ordering-seed",
    "order-seed-7",
];

#[test]
fn plans_of_fixed_seeds() {
    let server = server();
    let s = Some(server.addr);
    fixed_fleet(server.addr);
    for (name, args) in [("preview_canary", &CANARY[..]), ("preview_wide", &WIDE[..])] {
        let mut args = args.to_vec();
        args.push("--preview");
        let table = rackflow(s, &args).ok();
        assert_screen!(name, table.stdout);
    }
    // The plan of a seed does not depend on the order racks were created
    // in, nor on a second look: the same seeds, the same preview.
    let mut again = CANARY.to_vec();
    again.push("--preview");
    let first = rackflow(s, &again).ok().stdout;
    let second = rackflow(s, &again).ok().stdout;
    assert_eq!(first, second);
}

#[test]
fn main_screens_with_fixed_data() {
    let server = server();
    let s = Some(server.addr);
    fixed_fleet(server.addr);

    assert_screen!("rack_list", rackflow(s, &["rack", "list"]).ok().stdout);
    assert_screen!(
        "rack_list_with_components",
        rackflow(s, &["rack", "list", "--with-components"])
            .ok()
            .stdout
    );

    let run_id = rackflow(s, &CANARY).ok().stdout.trim().to_owned();
    assert_screen!("run_get", rackflow(s, &["run", "get", &run_id]).ok().stdout);
    assert_screen!(
        "run_targets",
        rackflow(s, &["run", "targets", &run_id]).ok().stdout
    );
    assert_screen!("run_list", rackflow(s, &["run", "list"]).ok().stdout);

    // One task, finished, so its row is fixed.
    let submitted = rackflow(
        s,
        &["power", "on", "--rack-external-ids", "r-0001", "-o", "json"],
    )
    .ok()
    .json();
    let task_id = submitted["task_ids"][0]
        .as_str()
        .unwrap_or_else(|| panic!("a task id: {submitted}"))
        .to_owned();
    let mut changes = server.waiter(format!("task {task_id} to finish"), Duration::from_secs(30));
    loop {
        let task = rackflow(s, &["task", "get", &task_id, "-o", "json"])
            .ok()
            .json();
        if task["tasks"][0]["status"] == "completed" {
            break;
        }
        changes.next_blocking(&task);
    }
    assert_screen!("task_list", rackflow(s, &["task", "list"]).ok().stdout);
}
