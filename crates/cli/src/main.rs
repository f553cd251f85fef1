//! The `rackflow` binary; everything lives in the `rackflow_cli` library.

fn main() -> std::process::ExitCode {
    rackflow_cli::main()
}
