//! The `abridge` command-line tool; all logic lives in the library.

/// jemalloc, with its background threads: what a request frees goes back to
/// the system within seconds while the proxy idles, where glibc keeps it in
/// its arenas for good (a 33 MB request held 450 MB).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    abridge_cli::main()
}
