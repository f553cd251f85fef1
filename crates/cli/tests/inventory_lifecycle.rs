//! The inventory lifecycle and NVLink domains from the command line (issue
//! 32): the built binary against an in-process server — `nvl-domain
//! create|attach|detach|list|racks`, `rack patch|delete|purge` and a
//! re-import under the same external id.

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
