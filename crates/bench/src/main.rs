//! The `basalt-bench` binary: `basalt-bench CONFIG... [-d DIR]` and
//! `basalt-bench compare DIR...` (see [`basalt_bench::cli`]).

/// The process allocator: mimalloc, as the `basalt` binary (see there).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match basalt_bench::cli::run(&args) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    }
}
