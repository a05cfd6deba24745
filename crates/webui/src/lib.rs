//! Static web assets shared by Basalt's HTML pages.
//!
//! Two parts of Basalt draw charts in a browser: the node's console
//! (`/console`, served by `basalt-server`) and the bench's self-contained
//! `report.html` / `compare.html` (written by `basalt-bench`). Both use the
//! same small, vendored chart library, uPlot, so that it is kept once, with
//! its licence, and nothing is fetched from a CDN or built with a Node
//! toolchain. The assets are compiled into the binaries with `include_str!`.

/// The version of the vendored uPlot (see `vendor/uplot/README.md`).
pub const UPLOT_VERSION: &str = "1.6.32";

/// uPlot's minified browser build (defines the global `uPlot`).
pub const UPLOT_JS: &str = include_str!("../vendor/uplot/uPlot.iife.min.js");

/// uPlot's style sheet.
pub const UPLOT_CSS: &str = include_str!("../vendor/uplot/uPlot.min.css");

/// uPlot's licence text (MIT), to be served or embedded beside the code.
pub const UPLOT_LICENSE: &str = include_str!("../vendor/uplot/LICENSE");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendored_library_is_whole() {
        assert!(UPLOT_JS.contains("uPlot"), "uPlot's script is present");
        assert!(UPLOT_JS.len() > 40_000, "the minified build is ~50 KB");
        assert!(UPLOT_CSS.contains(".uplot"));
        assert!(UPLOT_LICENSE.contains("MIT"));
        assert!(UPLOT_LICENSE.contains("Leon Sorokin"));
    }
}
