//! Runs a documented walkthrough as written: a section of a document under
//! `docs/`, whose `toml` blocks (`# file: NAME` on their first line) become
//! those files and whose `sh` blocks become one bash script, in the
//! document's order, in an empty directory with the built `rackflow` first
//! on PATH. Background jobs the script starts end with it.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How a script ended.
pub struct ScriptRun {
    pub script: String,
    pub stdout: String,
    pub stderr: String,
}

/// The script of the section of `docs/<doc>` that starts at the heading
/// line `heading` and ends at the next heading of the same or a higher
/// level.
pub fn section_script(doc: &str, heading: &str) -> String {
    let path = format!("{}/../../docs/{doc}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    let start = text
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("{doc} has no section {heading:?}"))
        + 1;
    let level = heading.chars().take_while(|c| *c == '#').count();
    let body = &text[start + heading.len()..];
    // The next heading of this level or above, outside code blocks (a
    // `# comment` in a block is not one).
    let mut in_block = false;
    let mut end = body.len();
    let mut offset = 0;
    for line in body.lines() {
        if line.starts_with("```") {
            in_block = !in_block;
        }
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !in_block && hashes > 0 && hashes <= level && line[hashes..].starts_with(' ') {
            end = offset;
            break;
        }
        offset += line.len() + 1;
    }
    script_of(&body[..end])
}

fn script_of(section: &str) -> String {
    let mut script = String::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        let Some(lang) = line.strip_prefix("```") else {
            continue;
        };
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .collect();
        match lang.trim() {
            "toml" => {
                let name = body
                    .first()
                    .and_then(|l| l.strip_prefix("# file: "))
                    .expect("a toml block starts with `# file: NAME`");
                script.push_str(&format!(
                    "cat > {name} <<'RACKFLOW_EOF'\n{}\nRACKFLOW_EOF\n",
                    body.join("\n")
                ));
            }
            "sh" => {
                script.push_str(&body.join("\n"));
                script.push('\n');
            }
            other => panic!("unexpected block ```{other} in a walkthrough"),
        }
    }
    script
}

/// Runs `steps` with bash (`set -euo pipefail`) in `dir`; panics with the
/// script and its output when it fails or outlives `deadline`.
pub fn run(dir: &Path, steps: &str, deadline: Duration) -> ScriptRun {
    let bin = Path::new(env!("CARGO_BIN_EXE_rackflow"))
        .parent()
        .expect("binary directory")
        .to_path_buf();
    let script = format!(
        "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT\n{steps}"
    );
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(dir)
        .env("PATH", path)
        .env("RUST_LOG", "warn")
        .env_remove("RACKFLOW_SERVER")
        .env_remove("DATABASE_URL")
        .env_remove("RACKFLOW_LISTEN")
        .env_remove("RACKFLOW_DB")
        .env_remove("RACKFLOW_TLS_CA")
        .env_remove("RACKFLOW_TLS_CLIENT_CERT")
        .env_remove("RACKFLOW_TLS_CLIENT_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn bash");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let give_up = Instant::now() + deadline;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > give_up {
            // SIGTERM: the script's trap stops what it started.
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let run = ScriptRun {
        script,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    };
    match status {
        Some(status) if status.success() => run,
        Some(status) => panic!(
            "the script failed ({status})\nscript:\n{}\nstdout:\n{}\nstderr:\n{}",
            run.script, run.stdout, run.stderr
        ),
        None => panic!(
            "the script did not finish in {deadline:?}\nscript:\n{}\nstdout:\n{}\nstderr:\n{}",
            run.script, run.stdout, run.stderr
        ),
    }
}

/// Fails unless each of `ports` on loopback is free (the documents use the
/// default ports).
pub fn assert_ports_free(ports: &[u16]) {
    for port in ports {
        assert!(
            std::net::TcpListener::bind(("127.0.0.1", *port)).is_ok(),
            "port {port} is taken: the documented walkthrough uses the default ports"
        );
    }
}
