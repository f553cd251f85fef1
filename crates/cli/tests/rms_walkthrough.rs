//! `docs/rms.md`'s walkthrough, run as written (issue 31 item 5), on Flow's
//! and the rack manager's default settings: the rack must end with its
//! compute and NVLink switch trays at the version the images declare, read
//! back through the rack manager.

mod common;

use std::time::Duration;

use common::doc_script;

#[test]
fn the_rms_walkthrough_runs_as_written() {
    doc_script::assert_ports_free(&[8801, 8802, 50051]);
    let steps = doc_script::section_script(
        "rms.md",
        "### Walkthrough: Flow on the rack manager, from scratch",
    );
    assert!(steps.contains("rackflow rms serve"), "{steps}");
    let dir = tempfile::tempdir().expect("temp dir");
    let run = doc_script::run(dir.path(), &steps, Duration::from_secs(180));
    // `rack get --with-components` (the last table): every compute and
    // switch tray at 2.0.0, read back.
    let table = run
        .stdout
        .rfind("FIRMWARE")
        .map(|i| &run.stdout[i..])
        .unwrap_or_else(|| panic!("no component table:\n{}", run.stdout));
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.contains("-compute-") || l.contains("-nvswitch-"))
        .collect();
    assert!(!rows.is_empty(), "no tray rows:\n{}", run.stdout);
    for row in &rows {
        assert!(row.contains("2.0.0"), "not upgraded: {row}\n{}", run.stdout);
    }
}
