//! The house, read from the code: which module of a crate imports which.
//!
//! `basalt-house` reads a crate's source files as text (no compiler, no
//! dependencies), maps each file to its module path (`src/kv/get.rs` is
//! `kv::get`, `src/kv/mod.rs` is `kv`), and collects the modules each file
//! names: in `use` trees (`use crate::a::{b, c::D}`, `super::`, `self::`, a
//! child module by its bare name) and in paths written inline
//! (`crate::kv::within(..)`). Comments, string and char literals and
//! `#[cfg(test)]` items are left out first, so a test module's imports and a
//! path in a doc comment do not count. A path resolves to the longest prefix
//! that is a module of the crate: `crate::kv::get::Get` is an import of
//! `kv::get`, `crate::kv::within` one of `kv`.
//!
//! On that graph the tests in `tests/house.rs` check the layer table of
//! ARCHITECTURE.md ([`Rules`]), import circles ([`circles`]), file sizes and
//! the paths ARCHITECTURE.md names. Reading is deliberately simple: a macro
//! that builds a path out of pieces is not seen (none does in this house).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// One source file of a crate.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// Module path inside the crate, `""` for the crate root.
    pub module: String,
    /// The file.
    pub path: PathBuf,
    /// The file's text.
    pub text: String,
}

/// The module path of a file below `src`: `kv/get.rs` → `kv::get`,
/// `kv/mod.rs` → `kv`, `lib.rs` / `main.rs` → `""`; `None` for a file that
/// is no module of the library's tree (`bin/…`, anything not `.rs`).
pub fn module_of(rel: &Path) -> Option<String> {
    if rel.extension()? != "rs" {
        return None;
    }
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?.to_string();
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    if parts.is_empty() && (stem == "lib" || stem == "main") {
        return Some(String::new());
    }
    if stem != "mod" {
        parts.push(stem);
    }
    Some(parts.join("::"))
}

/// Every `.rs` file below `src`, with its module path, sorted by module.
pub fn read_crate(src: &Path) -> io::Result<Vec<SourceFile>> {
    let mut files = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let Ok(rel) = p.strip_prefix(src) else {
                continue;
            };
            if let Some(module) = module_of(rel) {
                let text = fs::read_to_string(&p)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))?;
                files.push(SourceFile {
                    module,
                    path: p,
                    text,
                });
            }
        }
    }
    files.sort_by(|a, b| a.module.cmp(&b.module));
    Ok(files)
}

/// The text with comments, string literals and char literals blanked out
/// (replaced by spaces, so line numbers stay), lifetimes kept.
pub fn strip_comments_and_literals(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, s: &[u8]| {
        out.extend(s.iter().map(|&c| if c == b'\n' { b'\n' } else { b' ' }));
    };
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            let end = b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |p| i + p);
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            let start = i;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            blank(&mut out, &b[start..i.min(b.len())]);
        } else if c == b'r'
            && !prev_is_ident(b, i)
            && matches!(b.get(i + 1), Some(b'"') | Some(b'#'))
            && raw_string_end(b, i).is_some()
        {
            let end = raw_string_end(b, i).unwrap_or(b.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'"' {
            let start = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
            blank(&mut out, &b[start..i]);
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{1F600}', a multi-byte char) or
            // a lifetime ('a): a literal closes within a few bytes.
            let close = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map(|p| i + 3 + p)
            } else {
                b[i + 1..]
                    .iter()
                    .take(5)
                    .position(|&c| c == b'\'')
                    .filter(|&p| {
                        p >= 1
                            && std::str::from_utf8(&b[i + 1..i + 1 + p])
                                .is_ok_and(|s| s.chars().count() == 1)
                    })
                    .map(|p| i + 2 + p)
            };
            match close {
                Some(end) => {
                    blank(&mut out, &b[i..end]);
                    i = end;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

fn prev_is_ident(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// End (exclusive) of a raw string starting at `i` (`r"…"`, `r#"…"#`).
fn raw_string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    let mut hashes = 0;
    while b.get(j) == Some(&b'#') {
        hashes += 1;
        j += 1;
    }
    if b.get(j) != Some(&b'"') {
        return None;
    }
    j += 1;
    while j < b.len() {
        if b[j] == b'"'
            && b[j + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == b'#')
                .count()
                == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    None
}

/// The text (already stripped) without the items marked `#[cfg(test)]`
/// (test modules, test-only imports and helpers).
pub fn strip_test_items(src: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let end = item_end(item, MARK.len());
        out.extend(
            item[..end]
                .chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' }),
        );
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Where the item that starts after `from` ends: its first `;` outside
/// brackets, or the `}` that closes its first `{`.
fn item_end(s: &str, from: usize) -> usize {
    let b = s.as_bytes();
    let mut depth = 0i32;
    let mut i = from;
    // Skip further attributes of the same item.
    while i < b.len() {
        match b[i] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth <= 0 {
                    return i + 1;
                }
            }
            b';' if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// One path a file names, as segments (`["crate", "kv", "within"]`).
pub type UsePath = Vec<String>;

/// Every path named in `use` trees and inline (`crate::…`, `super::…`,
/// `self::…`) of a stripped text. `use` trees are expanded; a glob keeps
/// its prefix; `as` renames are dropped.
pub fn paths_named(stripped: &str) -> Vec<UsePath> {
    let mut out = Vec::new();
    let b = stripped.as_bytes();
    let mut inline_text = String::with_capacity(stripped.len());
    let mut i = 0;
    while i < b.len() {
        if stripped[i..].starts_with("use")
            && !prev_is_ident(b, i)
            && b.get(i + 3).is_some_and(|c| c.is_ascii_whitespace())
        {
            let end = stripped[i..].find(';').map_or(b.len(), |p| i + p);
            let tree = &stripped[i + 3..end];
            expand_tree(tree, &mut Vec::new(), &mut out);
            inline_text.push(' ');
            i = end + 1;
            continue;
        }
        inline_text.push(b[i] as char);
        i += 1;
    }
    // Inline paths: `crate::a::b`, `super::a`, `self::a` (a `self` alone,
    // the method receiver, is not a path).
    let ib = inline_text.as_bytes();
    for root in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(p) = inline_text[from..].find(root) {
            let at = from + p;
            from = at + root.len();
            if prev_is_ident(ib, at) || (at > 0 && ib[at - 1] == b':') {
                continue;
            }
            let mut segs = Vec::new();
            let mut j = at;
            loop {
                let k = j + ib[j..]
                    .iter()
                    .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
                    .unwrap_or(ib.len() - j);
                if k == j {
                    break;
                }
                segs.push(inline_text[j..k].to_string());
                if inline_text[k..].starts_with("::") {
                    j = k + 2;
                } else {
                    break;
                }
            }
            if segs.len() > 1 {
                out.push(segs);
            }
        }
    }
    out
}

/// Expands one `use` tree (`a::b::{c, d::e as f, g::*}`) into paths.
fn expand_tree(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<UsePath>) {
    let tree = tree.trim();
    let tree = tree.strip_prefix("::").unwrap_or(tree);
    if let Some(open) = tree.find('{') {
        let head = &tree[..open];
        let close = tree.rfind('}').unwrap_or(tree.len());
        let n = prefix.len();
        prefix.extend(
            head.split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from),
        );
        for part in split_top(&tree[open + 1..close]) {
            expand_tree(part, prefix, out);
        }
        prefix.truncate(n);
        return;
    }
    let path = tree.split(" as ").next().unwrap_or("").trim();
    if path.is_empty() {
        return;
    }
    let mut p = prefix.clone();
    for seg in path.split("::").map(str::trim) {
        if seg == "*" {
            break;
        }
        if seg == "self" && !p.is_empty() {
            continue;
        }
        p.push(seg.to_string());
    }
    if !p.is_empty() {
        out.push(p);
    }
}

/// Splits at commas outside braces.
fn split_top(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// The module a path names, from the file of `module` (with `is_mod_file`
/// when the file is a `mod.rs`/`lib.rs`, whose `super` is one step higher
/// than a leaf file's parent), among `known` modules; `None` for an
/// external crate's path.
pub fn resolve(module: &str, path: &[String], known: &BTreeSet<String>) -> Option<String> {
    let here: Vec<&str> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").collect()
    };
    let mut abs: Vec<&str>;
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            abs = Vec::new();
            rest = &path[1..];
        }
        Some("self") => {
            abs = here.clone();
            rest = &path[1..];
        }
        Some("super") => {
            abs = here.clone();
            while rest.first().map(String::as_str) == Some("super") {
                abs.pop()?;
                rest = &rest[1..];
            }
        }
        Some(first) => {
            // A child module named bare (2018 paths), else external.
            let mut child = here.clone();
            child.push(first);
            if !known.contains(&child.join("::")) {
                return None;
            }
            abs = here.clone();
        }
        None => return None,
    }
    let mut best = Some(abs.join("::")).filter(|m| known.contains(m));
    for seg in rest {
        abs.push(seg);
        let m = abs.join("::");
        if known.contains(&m) {
            best = Some(m);
        } else {
            break;
        }
    }
    best
}

/// The modules each module imports (never itself, nor the crate root, whose
/// re-exports only hand names on), from the files' texts.
pub fn import_graph(files: &[SourceFile]) -> BTreeMap<String, BTreeSet<String>> {
    let known: BTreeSet<String> = files.iter().map(|f| f.module.clone()).collect();
    let mut g = BTreeMap::new();
    for f in files {
        let text = strip_test_items(&strip_comments_and_literals(&f.text));
        let mut to = BTreeSet::new();
        for p in paths_named(&text) {
            if let Some(m) = resolve(&f.module, &p, &known) {
                if m != f.module && !m.is_empty() {
                    to.insert(m);
                }
            }
        }
        g.insert(f.module.clone(), to);
    }
    g
}

/// Whether `inner` is `outer` or lies below it (`kv::get` below `kv`).
pub fn is_within(inner: &str, outer: &str) -> bool {
    outer.is_empty()
        || inner == outer
        || (inner.starts_with(outer) && inner[outer.len()..].starts_with("::"))
}

/// Import circles between files: the strongly connected components of more
/// than one module, each sorted. An import of a module by one of its
/// ancestors (a folder's `mod.rs` naming its own files) does not count: a
/// folder's face handing on its parts is no circle.
pub fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let edges: BTreeMap<&str, Vec<&str>> = g
        .iter()
        .map(|(a, bs)| {
            (
                a.as_str(),
                bs.iter()
                    .map(String::as_str)
                    .filter(|b| !is_within(b, a))
                    .collect(),
            )
        })
        .collect();
    // Tarjan's algorithm, iterative.
    let nodes: Vec<&str> = edges.keys().copied().collect();
    let idx: BTreeMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let n = nodes.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on = vec![false; n];
    let mut stack = Vec::new();
    let mut next = 0;
    let mut out = Vec::new();
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work: Vec<(usize, usize)> = vec![(root, 0)];
        while let Some(&mut (v, ref mut ei)) = work.last_mut() {
            if *ei == 0 && index[v] == usize::MAX {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on[v] = true;
            }
            let succ: Vec<usize> = edges[nodes[v]]
                .iter()
                .filter_map(|w| idx.get(w).copied())
                .collect();
            if *ei < succ.len() {
                let w = succ[*ei];
                *ei += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(u, _)) = work.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == index[v] {
                let mut comp = Vec::new();
                while let Some(w) = stack.pop() {
                    on[w] = false;
                    comp.push(nodes[w].to_string());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    out.push(comp);
                }
            }
        }
    }
    out.sort();
    out
}

/// One part of a crate in the layer table: a module prefix (a folder or a
/// file) and what kind of part it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// A layer of the platform, with its rank: a layer imports only
    /// layers of lower rank.
    Layer(u32),
    /// A capability: imports any layer and the faces (the `mod.rs`, never
    /// the files inside) of the capabilities its row allows; no layer
    /// imports it.
    Capability,
    /// Assembly (the crate root, `node`): imports anything, nothing
    /// imports it but other assembly.
    Assembly,
}

/// A crate's layer table: each top part by its module prefix, and which
/// capabilities each capability may use.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// Module prefix → part. The longest matching prefix decides.
    pub parts: Vec<(&'static str, Part)>,
    /// Capability → the capabilities whose face it may import.
    pub uses: Vec<(&'static str, &'static [&'static str])>,
}

impl Rules {
    /// The part a module belongs to (its longest prefix in the table).
    pub fn part_of(&self, module: &str) -> Option<(&'static str, Part)> {
        self.parts
            .iter()
            .filter(|(p, _)| is_within(module, p))
            .max_by_key(|(p, _)| p.len())
            .copied()
    }

    /// Every import of `g` that breaks the table, as `from -> to: why`.
    pub fn violations(&self, g: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
        let mut out = Vec::new();
        for (from, tos) in g {
            let Some((fp, fpart)) = self.part_of(from) else {
                out.push(format!("{from}: in no part of the layer table"));
                continue;
            };
            for to in tos {
                let Some((tp, tpart)) = self.part_of(to) else {
                    out.push(format!("{to}: in no part of the layer table"));
                    continue;
                };
                if fp == tp {
                    continue;
                }
                if let Some(why) = self.breaks(fp, fpart, to, tp, tpart) {
                    out.push(format!("{from} -> {to}: {why}"));
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    fn breaks(&self, fp: &str, fpart: Part, to: &str, tp: &str, tpart: Part) -> Option<String> {
        match (fpart, tpart) {
            (Part::Assembly, _) => None,
            (_, Part::Assembly) => Some(format!("runs up into assembly ({tp})")),
            (Part::Layer(a), Part::Layer(b)) if b < a => None,
            (Part::Layer(_), Part::Layer(_)) => Some(format!(
                "layer {fp} imports layer {tp}, which is not below it"
            )),
            (Part::Layer(_), Part::Capability) => {
                Some(format!("layer {fp} imports capability {tp}"))
            }
            (Part::Capability, Part::Layer(_)) => None,
            (Part::Capability, Part::Capability) => {
                let allowed = self
                    .uses
                    .iter()
                    .find(|(c, _)| *c == fp)
                    .is_some_and(|(_, us)| us.contains(&tp));
                if !allowed {
                    Some(format!("capability {fp} may not use capability {tp}"))
                } else if to != tp {
                    Some(format!("capability {fp} reaches into {tp}'s internals"))
                } else {
                    None
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(xs: &[&str]) -> BTreeSet<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    fn file(module: &str, text: &str) -> SourceFile {
        SourceFile {
            module: module.into(),
            path: PathBuf::new(),
            text: text.into(),
        }
    }

    #[test]
    fn module_paths() {
        assert_eq!(module_of(Path::new("lib.rs")).as_deref(), Some(""));
        assert_eq!(module_of(Path::new("kv/mod.rs")).as_deref(), Some("kv"));
        assert_eq!(
            module_of(Path::new("kv/get.rs")).as_deref(),
            Some("kv::get")
        );
        assert_eq!(module_of(Path::new("js/builtins.js")), None);
        assert_eq!(module_of(Path::new("bin/x.rs")), None);
    }

    #[test]
    fn literals_and_comments_are_not_imports() {
        let s = strip_comments_and_literals(
            "// use crate::a;\n/* crate::b::c */ let s = \"crate::d::e\"; let c = '\"'; fn f<'a>(x: &'a u8) {} crate::f::g();",
        );
        let paths = paths_named(&s);
        assert_eq!(
            paths,
            vec![vec!["crate".to_string(), "f".into(), "g".into()]]
        );
    }

    #[test]
    fn use_trees_expand() {
        let mut out = Vec::new();
        expand_tree(
            " crate::a::{b, c::{D, e as f}, self, g::*}",
            &mut Vec::new(),
            &mut out,
        );
        let j: Vec<String> = out.iter().map(|p| p.join("::")).collect();
        assert_eq!(
            j,
            [
                "crate::a::b",
                "crate::a::c::D",
                "crate::a::c::e",
                "crate::a",
                "crate::a::g"
            ]
        );
    }

    #[test]
    fn resolution_takes_the_longest_module_prefix() {
        let known = set(&["", "kv", "kv::get", "router", "vnode", "vnode::request"]);
        let r = |m: &str, p: &str| {
            resolve(
                m,
                &p.split("::").map(String::from).collect::<Vec<_>>(),
                &known,
            )
        };
        assert_eq!(
            r("kv::get", "crate::router::Router").as_deref(),
            Some("router")
        );
        assert_eq!(r("kv::get", "super::within").as_deref(), Some("kv"));
        assert_eq!(r("kv", "get::Get").as_deref(), Some("kv::get"));
        assert_eq!(r("kv", "self::get::Get").as_deref(), Some("kv::get"));
        assert_eq!(
            r("kv::get", "super::super::vnode::request::X").as_deref(),
            Some("vnode::request")
        );
        assert_eq!(r("kv::get", "std::sync::Arc"), None);
    }

    #[test]
    fn test_items_are_left_out() {
        let s = strip_test_items("use crate::a::X;\n#[cfg(test)]\nmod tests { use crate::b::Y; }\n#[cfg(test)]\nuse crate::c;\nfn f() {}");
        let j: Vec<String> = paths_named(&s).iter().map(|p| p.join("::")).collect();
        assert_eq!(j, ["crate::a::X"]);
    }

    #[test]
    fn circles_are_found_and_a_face_is_none() {
        let g = import_graph(&[
            file("a", "use crate::b::X;"),
            file("b", "use crate::c::Y;"),
            file("c", "fn f() { crate::a::g(); }"),
            file("d", "pub use self::e::Z;"),
            file("d::e", "use super::W;"),
        ]);
        assert_eq!(
            circles(&g),
            vec![vec!["a".to_string(), "b".into(), "c".into()]]
        );
    }

    /// The layer check fails on each kind of wrong import.
    #[test]
    fn wrong_imports_are_named() {
        let rules = Rules {
            parts: vec![
                ("", Part::Assembly),
                ("node", Part::Assembly),
                ("kv", Part::Layer(3)),
                ("router", Part::Layer(2)),
                ("object", Part::Layer(1)),
                ("aae", Part::Capability),
                ("repl", Part::Capability),
                ("mapred", Part::Capability),
            ],
            uses: vec![("aae", &["repl"])],
        };
        let g = import_graph(&[
            file("node", "use crate::aae::Aae; use crate::kv::Get;"),
            file("kv", "use crate::router::R; use crate::object::O;"),
            file("router", "use crate::kv::Get;"),
            file("object", "use crate::aae::T;"),
            file("aae", "use crate::repl::Sink; use crate::repl::queue::Q; use crate::mapred::M; use crate::kv::K;"),
            file("repl", "use crate::node::Node;"),
            file("repl::queue", ""),
            file("mapred", ""),
        ]);
        assert_eq!(
            rules.violations(&g),
            vec![
                "aae -> mapred: capability aae may not use capability mapred",
                "aae -> repl::queue: capability aae reaches into repl's internals",
                "object -> aae: layer object imports capability aae",
                "repl -> node: runs up into assembly (node)",
                "router -> kv: layer router imports layer kv, which is not below it",
            ]
        );
    }
}
