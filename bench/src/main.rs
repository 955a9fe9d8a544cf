//! `jobstore-bench`: see the library's documentation (`bench/src/lib.rs`) and BENCHMARKS.md.

use clap::Parser;

fn main() -> std::process::ExitCode {
    jobstore_bench::main_with(jobstore_bench::cli::Args::parse())
}
