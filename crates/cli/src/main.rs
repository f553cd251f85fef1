//! The `rackflow` binary; everything lives in the `rackflow_cli` library.

/// mimalloc instead of glibc's malloc: with a thousand tasks in flight the
/// server spent a third of its CPU in glibc's allocator (`_int_malloc`,
/// `malloc_consolidate`, `unlink_chunk`); see `cargo bench -p rackflow
/// --bench fleet`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    rackflow_cli::main()
}
