//! The inventory lifecycle and NVLink domains from the command line (issue
//! 32): the built binary against an in-process server — `nvl-domain
//! create|attach|detach|list|get|racks`, `rack create|patch|delete|purge`,
//! `component get`, a re-import under the same external id, and
//! `--nvl-domain` targets for tasks and runs.

mod common;

use common::{Server, import_generated_fleet, path_str, rackflow, temp_path};

fn rack_uuid(server: Option<std::net::SocketAddr>, external_id: &str) -> String {
    let got = rackflow(server, &["rack", "get", external_id, "-o", "json"]).ok();
    got.json()["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id: {}", got.stdout))
        .to_string()
}

#[test]
fn domains_patch_delete_purge_and_reimport() {
    let server = Server::start();
    let s = Some(server.addr);
    let fleet = import_generated_fleet(s, 3);

    // NVLink domains.
    let created = rackflow(
        s,
        &["nvl-domain", "create", "nvl-a", "--external-id", "ext-a"],
    )
    .ok();
    let domain = created.stdout.trim().to_string();
    uuid::Uuid::parse_str(&domain).unwrap_or_else(|e| panic!("{e}: {domain:?}"));
    let one = rack_uuid(s, "r-0001");
    let two = rack_uuid(s, "r-0002");
    rackflow(s, &["nvl-domain", "attach", "nvl-a", &one, &two]).ok();
    let members = rackflow(s, &["nvl-domain", "racks", &domain, "-o", "json"]).ok();
    let ids: Vec<String> = members
        .json()
        .as_array()
        .expect("racks")
        .iter()
        .map(|r| r["id"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(ids.len(), 2, "{}", members.stdout);
    assert!(ids.contains(&one) && ids.contains(&two), "{ids:?}");
    rackflow(s, &["nvl-domain", "detach", &two]).ok();
    let listed = rackflow(s, &["nvl-domain", "list", "-o", "json"])
        .ok()
        .json();
    assert_eq!(listed["total"], 1, "{listed}");
    assert_eq!(listed["domains"][0]["name"], "nvl-a");
    assert_eq!(listed["domains"][0]["external_id"], "ext-a");
    let unknown = rackflow(s, &["nvl-domain", "racks", "nvl-zz"]);
    assert_eq!(unknown.code, Some(1));
    assert!(
        unknown.stderr.contains("NotFound") && unknown.stderr.contains("nvl-zz"),
        "{}",
        unknown.stderr
    );

    // Patch: the report of what changed.
    let report = rackflow(
        s,
        &[
            "rack", "patch", "r-0001", "--name", "renamed", "--room", "B", "-o", "json",
        ],
    )
    .ok()
    .json();
    assert_eq!(report["changed"]["name"]["to"], "renamed", "{report}");
    assert_eq!(report["changed"]["location"]["to"]["room"], "B", "{report}");
    let table = rackflow(s, &["rack", "patch", "r-0001", "--name", "renamed"]).ok();
    assert!(table.stdout.contains("nothing"), "{}", table.stdout);

    // Purge before delete is refused; delete, purge, re-import.
    let three = rack_uuid(s, "r-0003");
    let early = rackflow(s, &["rack", "purge", &three]);
    assert_eq!(early.code, Some(1));
    assert!(
        early.stderr.contains("FailedPrecondition") && early.stderr.contains("DeleteRack first"),
        "{}",
        early.stderr
    );
    rackflow(s, &["rack", "delete", "r-0003"]).ok();
    let gone = rackflow(s, &["rack", "get", "r-0003"]);
    assert_eq!(gone.code, Some(1), "{}", gone.stdout);
    rackflow(s, &["rack", "purge", &three]).ok();
    let file = temp_path("fleet.json");
    std::fs::write(&file, fleet.to_string()).expect("write fleet");
    rackflow(s, &["fleet", "import", path_str(&file)]).ok();
    std::fs::remove_file(&file).ok();
    // The external id is free again: the rack is back.
    rack_uuid(s, "r-0003");
}

#[test]
fn domain_views_and_domain_targets() {
    let server = Server::start();
    let s = Some(server.addr);
    import_generated_fleet(s, 3);
    rackflow(
        s,
        &["nvl-domain", "create", "nvl-a", "--external-id", "grp-a"],
    )
    .ok();
    rackflow(s, &["nvl-domain", "create", "nvl-spare"]).ok();
    let one = rack_uuid(s, "r-0001");
    let two = rack_uuid(s, "r-0002");
    rackflow(s, &["nvl-domain", "attach", "nvl-a", &one, &two]).ok();

    // rack create, straight into a domain.
    let created = rackflow(
        s,
        &[
            "rack",
            "create",
            "spare-1",
            "--external-id",
            "r-0099",
            "--model",
            "GB200 NVL72",
            "--region",
            "eu",
            "--nvl-domain",
            "nvl-spare",
            "-o",
            "json",
        ],
    )
    .ok()
    .json();
    let spare = created["id"].as_str().expect("id").to_string();
    let members = rackflow(s, &["nvl-domain", "racks", "nvl-spare", "-o", "json"])
        .ok()
        .json();
    assert_eq!(members[0]["id"], spare.as_str(), "{members}");
    assert_eq!(members[0]["location"]["region"], "eu");
    let duplicate = rackflow(s, &["rack", "create", "again", "--external-id", "r-0099"]);
    assert_eq!(duplicate.code, Some(1));
    assert!(
        duplicate.stderr.contains("AlreadyExists"),
        "{}",
        duplicate.stderr
    );

    // nvl-domain get: the view, by rack group id, with components.
    let view = rackflow(
        s,
        &[
            "nvl-domain",
            "get",
            "grp-a",
            "--with-components",
            "-o",
            "json",
        ],
    )
    .ok()
    .json();
    assert_eq!(view["id"], "grp-a", "{view}");
    assert_eq!(view["rack_group_id"], "grp-a");
    assert_eq!(view["name"], "nvl-a");
    assert_eq!(view["operation_status"], "unknown");
    let components = view["components"].as_array().expect("components");
    assert!(!components.is_empty(), "{view}");
    for c in components {
        assert_eq!(c["nvl_domain_external_id"], "grp-a", "{c}");
        let rack = c["rack_external_id"].as_str().unwrap_or_default();
        assert!(["r-0001", "r-0002"].contains(&rack), "{c}");
    }
    let table = rackflow(s, &["nvl-domain", "get", "nvl-a"]).ok();
    assert!(
        table.stdout.contains("Rack group") && table.stdout.contains("grp-a"),
        "{}",
        table.stdout
    );

    // rack get and component get name the domain.
    let rack = rackflow(s, &["rack", "get", "r-0001"]).ok();
    assert!(
        rack.stdout.contains("NVLink domain") && rack.stdout.contains("grp-a"),
        "{}",
        rack.stdout
    );
    let component_id = components[0]["id"].as_str().expect("component id");
    let component = rackflow(s, &["component", "get", component_id, "-o", "json"])
        .ok()
        .json();
    assert_eq!(component["nvl_domain_external_id"], "grp-a", "{component}");
    let table = rackflow(s, &["component", "get", component_id]).ok();
    assert!(table.stdout.contains("NVLink domain"), "{}", table.stdout);

    // A power task and a run aimed at the domain: its two racks only.
    let tasks = rackflow(s, &["power", "on", "--nvl-domain", "nvl-a", "-o", "json"])
        .ok()
        .json();
    assert_eq!(
        tasks["task_ids"].as_array().map(Vec::len),
        Some(2),
        "{tasks}"
    );
    let preview = rackflow(
        s,
        &[
            "run",
            "create",
            "--name",
            "by-domain",
            "--target-version",
            "9.9.9",
            "--same-version-for-all-models",
            "--failure-rate",
            "10",
            "--nvl-domain",
            "nvl-a",
            "--preview",
            "-o",
            "json",
        ],
    )
    .ok()
    .json();
    let mut racks: Vec<String> = preview["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .map(|t| {
            t["rack_external_id"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    racks.sort();
    assert_eq!(racks, ["r-0001", "r-0002"], "{preview}");
    let mixed = rackflow(
        s,
        &[
            "run",
            "create",
            "--name",
            "x",
            "--failure-rate",
            "10",
            "--nvl-domain",
            "nvl-a",
            "--racks",
            "r",
            "--preview",
        ],
    );
    assert_eq!(mixed.code, Some(1));
    assert!(mixed.stderr.contains("cannot be"), "{}", mixed.stderr);

    // Ingest and decommission of a rack without components: refused.
    for verb in ["ingest", "decommission"] {
        let submitted = rackflow(s, &["rack", verb, "--rack-external-ids", "r-0099"]);
        assert_eq!(submitted.code, Some(1), "{verb}: {}", submitted.stdout);
        assert!(
            submitted.stderr.starts_with("error: "),
            "{}",
            submitted.stderr
        );
    }

    // An AC power cycle of rack 3: a cold_reset task.
    let cycled = rackflow(
        s,
        &[
            "rack",
            "ac-power-cycle",
            "--rack-external-ids",
            "r-0003",
            "-o",
            "json",
        ],
    )
    .ok()
    .json();
    let cycle_id = cycled["task_ids"][0].as_str().expect("task id").to_string();
    let task = rackflow(s, &["task", "get", &cycle_id, "-o", "json"])
        .ok()
        .json();
    assert_eq!(
        task["tasks"][0]["operation"], "power_control/cold_reset",
        "{task}"
    );
}

#[test]
fn generated_domains_import_once() {
    let server = Server::start();
    let s = Some(server.addr);
    let generated = rackflow(
        None,
        &[
            "fleet",
            "generate",
            "--racks",
            "5",
            "--seed",
            "4",
            "--racks-per-domain",
            "2",
        ],
    )
    .ok();
    let fleet = generated.json();
    let second = fleet["nvl_domains"][1]["name"]
        .as_str()
        .expect("domain")
        .to_string();
    let group = fleet["nvl_domains"][0]["external_id"]
        .as_str()
        .expect("group")
        .to_string();
    let file = temp_path("fleet.json");
    std::fs::write(&file, &generated.stdout).expect("write fleet");
    let first = rackflow(s, &["fleet", "import", path_str(&file), "-o", "json"])
        .ok()
        .json();
    let created: Vec<bool> = first["nvl_domains"]
        .as_array()
        .expect("domains")
        .iter()
        .map(|d| d["created"].as_bool().unwrap_or_default())
        .collect();
    assert_eq!(created, [true, true, true], "{first}");
    let members = rackflow(s, &["nvl-domain", "racks", &second, "-o", "json"])
        .ok()
        .json();
    let racks: Vec<&str> = members
        .as_array()
        .expect("racks")
        .iter()
        .map(|r| r["external_id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(racks, ["r-0003", "r-0004"], "{members}");
    // Again: nothing new, the domains found.
    let again = rackflow(s, &["fleet", "import", path_str(&file), "-o", "json"])
        .ok()
        .json();
    std::fs::remove_file(&file).ok();
    assert_eq!(
        again["created"].as_array().map(Vec::len),
        Some(0),
        "{again}"
    );
    assert_eq!(again["nvl_domains"][0]["created"], false, "{again}");
    assert_eq!(again["nvl_domains"][2]["racks"], 1);
    let listed = rackflow(s, &["nvl-domain", "list", "-o", "json"])
        .ok()
        .json();
    assert_eq!(listed["total"], 3, "{listed}");
    let view = rackflow(s, &["nvl-domain", "get", &group, "-o", "json"])
        .ok()
        .json();
    assert_eq!(view["rack_group_id"], group.as_str(), "{view}");
}
