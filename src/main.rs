fn main() -> std::process::ExitCode {
    jobstore::cli::main()
}
