//! `docs/security.md`'s openssl recipe, run as written (issue 31 item 6):
//! a CA, a server certificate with SANs, a client certificate with a URI
//! SAN and clientAuth; `rackflow serve` with mTLS in enforce mode on them,
//! and the documented client commands as that identity.

mod common;

use std::time::Duration;

use common::doc_script;

#[test]
fn the_openssl_recipe_gives_a_working_mtls_setup() {
    doc_script::assert_ports_free(&[50051]);
    let steps =
        doc_script::section_script("security.md", "### Certificates with openssl, step by step");
    assert!(steps.contains("openssl req -x509"), "{steps}");
    let dir = tempfile::tempdir().expect("temp dir");
    let run = doc_script::run(dir.path(), &steps, Duration::from_secs(120));
    // `version` answered with the server's version, the lists ran.
    assert!(run.stdout.contains("server"), "{}", run.stdout);
}
