//! The `reactor` binary: parse the command line and hand over to [`reactor::cli`].

fn main() -> std::process::ExitCode {
    reactor::cli::main()
}
