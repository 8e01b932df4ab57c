//! The `abridge` command-line tool; all logic lives in the library.

fn main() -> std::process::ExitCode {
    abridge_cli::main()
}
