//! Compiles `proto/v1/flow.proto` (and the rack manager's
//! `proto/rack_manager/rack_manager.proto`) with a vendored `protoc`, so a fresh machine
//! needs no system protobuf compiler.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let include = protoc_bin_vendored::include_path()?;
    // SAFETY: build scripts are single-threaded; prost-build reads PROTOC.
    // The workspace denies unsafe code; this is its one use.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("PROTOC", protoc);
        std::env::set_var("PROTOC_INCLUDE", &include);
    }
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("flow_descriptor.bin"))
        .compile_protos(
            &[
                root.join("v1/flow.proto"),
                root.join("rackflow/sim/v1/sim.proto"),
                root.join("rack_manager/rack_manager.proto"),
                root.join("rackflow/rms/v1/rms.proto"),
            ],
            &[root.clone(), include],
        )?;
    println!("cargo:rerun-if-changed={}", root.display());
    Ok(())
}
