//! The house's own checks, run in CI with every other test: imports run the
//! way ARCHITECTURE.md's layer table says, no new import circle, no new
//! source file over 1,000 lines, and every path ARCHITECTURE.md names
//! exists.
//!
//! Where the house is not yet what the map says, the gap is written down
//! here as a named list (`SERVER_DEBT`, `CIRCLES`, `LARGE_FILES`): a new
//! gap fails, and so does an entry that is no longer true, so the lists
//! only shrink. Each test prints what it read, so a failure says what to
//! fix.

use basalt_house::{circles, import_graph, read_crate, Part, Rules};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The workspace root: from the manifest directory cargo gives the test at
/// run time (a binary built in another checkout still reads this one), else
/// the one it was built in.
fn root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|e| panic!("workspace root: {e}"))
}

/// Every crate's `src` folder, by crate folder name.
fn crates() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let dir = root().join("crates");
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap_or_else(|e| panic!("{e}")).path();
        if p.join("src").is_dir() {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.push((name, p.join("src")));
        }
    }
    out.sort();
    out
}

/// The server's layer table (ARCHITECTURE.md "The server"): the
/// platform's layers by rank, lowest first; the capabilities beside them;
/// the assembly on top.
fn server_rules() -> Rules {
    use Part::*;
    Rules {
        parts: vec![
            ("", Assembly),
            ("node", Assembly),
            ("fuzz_api", Assembly),
            // The web console: the admin line's views and actions over
            // HTTP, so it sits with the assembly it calls.
            ("console", Assembly),
            // The platform, lowest first.
            ("limits", Layer(1)),
            ("pb", Layer(1)),
            ("fsutil", Layer(1)),
            ("latency", Layer(1)),
            ("error", Layer(1)),
            ("ring", Layer(1)),
            ("crdt", Layer(2)),
            ("security", Layer(2)),
            ("object", Layer(3)),
            ("bucket", Layer(4)),
            ("config", Layer(5)),
            ("vnode", Layer(6)),
            ("cluster", Layer(7)),
            ("router", Layer(8)),
            ("kv", Layer(9)),
            ("api", Layer(10)),
            // Capabilities.
            ("aae", Capability),
            ("repl", Capability),
            ("mapred", Capability),
            ("datatypes", Capability),
            ("handoff", Capability),
            ("gossip", Capability),
        ],
        uses: vec![("repl", &["aae", "gossip"]), ("gossip", &["handoff"])],
    }
}

/// Imports of the server that break its layer table today, each to be
/// removed by the server-house work (issue 54): `from -> to: why`, as
/// `Rules::violations` prints them.
const SERVER_DEBT: &[&str] = &[];

#[test]
fn server_imports_follow_the_layer_table() {
    let src = root().join("crates/server/src");
    let files = read_crate(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let rules = server_rules();
    let found: BTreeSet<String> = rules
        .violations(&import_graph(&files))
        .into_iter()
        .collect();
    let debt: BTreeSet<String> = SERVER_DEBT.iter().map(|s| s.to_string()).collect();
    let new: Vec<&String> = found.difference(&debt).collect();
    let gone: Vec<&String> = debt.difference(&found).collect();
    println!(
        "{} imports against the layer table ({} listed as debt)",
        found.len(),
        debt.len()
    );
    assert!(
        new.is_empty(),
        "imports against the server's layer table (ARCHITECTURE.md \"The server\"); make them run down, or through an interface the platform defines:\n  {}",
        new.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  ")
    );
    assert!(
        gone.is_empty(),
        "no longer true, strike from SERVER_DEBT:\n  {}",
        gone.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  ")
    );
}

/// Import circles between files that are known and explained in
/// ARCHITECTURE.md, as `crate: a b c` (modules sorted).
const CIRCLES: &[&str] = &[];

#[test]
fn no_new_import_circles() {
    let mut found = BTreeSet::new();
    for (name, src) in crates() {
        let files = read_crate(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
        for c in circles(&import_graph(&files)) {
            found.insert(format!("{name}: {}", c.join(" ")));
        }
    }
    let known: BTreeSet<String> = CIRCLES.iter().map(|s| s.to_string()).collect();
    for c in &found {
        println!("circle {c}");
    }
    let new: Vec<&String> = found.difference(&known).collect();
    let gone: Vec<&String> = known.difference(&found).collect();
    assert!(
        new.is_empty(),
        "new import circles (files that import each other); move what they share below both:\n  {}",
        new.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  ")
    );
    assert!(
        gone.is_empty(),
        "circles gone, strike them from CIRCLES and ARCHITECTURE.md:\n  {}",
        gone.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  ")
    );
}

/// The size over which a source file must be split by role.
const MAX_LINES: usize = 1_000;

/// Source files over [`MAX_LINES`] today, with the most lines each may
/// have: a listed file may shrink, not grow, and leaves the list once it is
/// under the limit. Test files (`tests/`, `tests.rs`) do not count.
const LARGE_FILES: &[(&str, usize)] = &[];

#[test]
fn no_new_large_source_files() {
    let root = root();
    let mut large = Vec::new();
    for (_, src) in crates() {
        let files = read_crate(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
        for f in files {
            let rel = f
                .path
                .strip_prefix(&root)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            if rel.ends_with("/tests.rs") || rel.contains("/tests/") {
                continue;
            }
            let lines = f.text.lines().count();
            if lines > MAX_LINES {
                large.push((rel, lines));
            }
        }
    }
    large.sort();
    for (p, n) in &large {
        println!("{n:6} {p}");
    }
    let mut wrong = Vec::new();
    for (p, n) in &large {
        match LARGE_FILES.iter().find(|(q, _)| q == p) {
            None => wrong.push(format!(
                "{p}: {n} lines, over {MAX_LINES}: split it by role"
            )),
            Some((_, max)) if n > max => wrong.push(format!(
                "{p}: {n} lines, grew past its listed {max}: split it by role"
            )),
            _ => {}
        }
    }
    for (p, _) in LARGE_FILES {
        if !large.iter().any(|(q, _)| q == p) {
            wrong.push(format!(
                "{p}: now under {MAX_LINES} lines (or gone): strike it from LARGE_FILES"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Backquoted words of a Markdown text that look like repository paths.
fn named_paths(md: &str) -> Vec<String> {
    const ROOTS: &[&str] = &[
        "crates/",
        "docs/",
        "scripts/",
        "interop/",
        "examples/",
        "fuzz/",
        ".ci/",
    ];
    let mut out = Vec::new();
    for (i, part) in md.split('`').enumerate() {
        if i % 2 == 1 && ROOTS.iter().any(|r| part.starts_with(r)) && !part.contains(' ') {
            out.push(part.to_string());
        }
    }
    out
}

/// Every module a table row of ARCHITECTURE.md names under a heading that
/// names a crate's source folder (`### \`crates/server/src\``): the first
/// cell's backquoted names, each a file or folder below that `src`.
fn named_modules(md: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut src: Option<String> = None;
    for line in md.lines() {
        if line.starts_with('#') {
            src = line
                .split('`')
                .nth(1)
                .filter(|s| s.starts_with("crates/") && s.ends_with("/src"))
                .map(String::from);
            continue;
        }
        let (Some(src), Some(row)) = (&src, line.strip_prefix('|')) else {
            continue;
        };
        let first = row.split('|').next().unwrap_or("");
        for (i, part) in first.split('`').enumerate() {
            if i % 2 == 1 {
                for name in part.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    out.push((src.clone(), name.to_string()));
                }
            }
        }
    }
    out
}

/// Whether `name` (`kv/`, `kv/get`, `api::pb`, `js/builtins.js`) is a file
/// or folder below `src`.
fn module_exists(src: &Path, name: &str) -> bool {
    let rel = name.replace("::", "/");
    let rel = rel.trim_end_matches('/');
    let p = src.join(rel);
    p.is_dir() || p.is_file() || p.with_extension("rs").is_file()
}

#[test]
fn architecture_names_only_what_exists() {
    let root = root();
    let md = std::fs::read_to_string(root.join("ARCHITECTURE.md"))
        .unwrap_or_else(|e| panic!("ARCHITECTURE.md: {e}"));
    let lines = md.lines().count();
    assert!(
        lines <= 400,
        "ARCHITECTURE.md has {lines} lines: keep the map short (at most 400)"
    );
    let mut missing = Vec::new();
    let paths = named_paths(&md);
    for p in &paths {
        let path = p.trim_end_matches('/');
        let path = path.split(':').next().unwrap_or(path);
        if !root.join(path).exists() {
            missing.push(format!("path {p}"));
        }
    }
    let modules = named_modules(&md);
    for (src, name) in &modules {
        if !module_exists(&root.join(src), name) {
            missing.push(format!("module {name} under {src}"));
        }
    }
    println!("{} paths and {} modules named", paths.len(), modules.len());
    assert!(
        modules.len() > 20,
        "the module tables were not found: headings name a crate's source folder as `crates/<name>/src`"
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names what does not exist:\n  {}",
        missing.join("\n  ")
    );
}

/// The checks above fail on a wrong import and a wrong path (so that they
/// cannot pass by reading nothing).
#[test]
fn the_checks_see_a_wrong_import_and_a_wrong_path() {
    let rules = server_rules();
    let files = vec![
        basalt_house::SourceFile {
            module: "vnode".into(),
            path: PathBuf::new(),
            text: "use crate::kv::Kv;".into(),
        },
        basalt_house::SourceFile {
            module: "kv".into(),
            path: PathBuf::new(),
            text: "use crate::repl::Sink;".into(),
        },
        basalt_house::SourceFile {
            module: "repl".into(),
            path: PathBuf::new(),
            text: String::new(),
        },
    ];
    let v = rules.violations(&import_graph(&files));
    assert_eq!(
        v,
        [
            "kv -> repl: layer kv imports capability repl",
            "vnode -> kv: layer vnode imports layer kv, which is not below it"
        ]
    );
    let src = root().join("crates/server/src");
    assert!(module_exists(&src, "kv/"));
    assert!(!module_exists(&src, "no_such_module"));
    let md = "### `crates/server/src`\n| `kv/`, `nope` | x |\n";
    assert_eq!(
        named_modules(md),
        [
            ("crates/server/src".to_string(), "kv/".to_string()),
            ("crates/server/src".to_string(), "nope".to_string())
        ]
    );
    assert_eq!(
        named_paths("see `docs/x.md` and `crates/a b`"),
        ["docs/x.md"]
    );
}
