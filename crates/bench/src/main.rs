//! The `basalt-bench` binary: `basalt-bench CONFIG... [-d DIR]` and
//! `basalt-bench compare DIR...` (see [`basalt_bench::cli`]).

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
