//! The `interlock` binary: everything is in the library's `cli` module.

#![forbid(unsafe_code)]

use std::process::ExitCode;

// See Cargo.toml and docs/PERFORMANCE.md for why not the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    interlock::cli::run()
}
