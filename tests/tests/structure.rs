//! The repository's structure, checked from its sources (plain std, no parser crate):
//!
//! - **No import cycles between sibling modules** of `weir-reactor`, `weir-executor`, `weir-net`,
//!   `weir-macros`, `weir-config`, `weir-io-uring-compat` and the facade (`src/`). For every module M and two of its children A and B,
//!   A imports B when a file in A's subtree names a path that resolves into B's subtree
//!   (`crate::…`, `super::…`, `self::…`, in `use` trees and inline). References between a
//!   module and its ancestors do not count. Each module's graph of its children must be
//!   acyclic; the failure lists every cycle with one reference (file:line) per edge.
//! - **ARCHITECTURE.md names only paths that exist** (backticked repository paths and link
//!   targets), **and names everything that exists** of two kinds: every crate (a directory
//!   with a `Cargo.toml`, in the crates table) and every script in `scripts/`.
//! - **The crates' import map is what the table says**: each crate's row lists exactly the
//!   weir crates its `Cargo.toml` depends on; the map has no cycle; no runtime crate depends
//!   (even for its tests) on a client, nor names one in its sources.
//! - **The facade's modules use the runtime crates only through [`FACADE_SURFACE`]**.
//! - **Links into `bench/README.md`** (from the README, `docs/`, ARCHITECTURE.md and the
//!   clients' READMEs) name headings that exist there.
//! - **Long files argue why they are one idea**: a file of more than [`LONG_FILE`] lines in
//!   `reactor/src`, `io-uring-compat/src`, `executor/src` or `net/src` says why in its module
//!   doc, with `One idea:`.
//!   Reported, not enforced (see [`LONG_FILES_FAIL`]).
//!
//! `scripts/module-graph.sh` prints every sibling graph with its evidence (the `print_graph`
//! test below), so the check can be reproduced and read.
//!
//! How paths are read: comments and the contents of string and character literals are blanked
//! first. The module tree comes from `mod` declarations (`name.rs`, `name/mod.rs`, `#[path]`,
//! inline `mod name { … }`, whatever their `#[cfg]`). A path resolves to the deepest module it
//! names (`crate::time::queue::TimerQueue` → `time::queue`); what follows (items, re-exports)
//! is not followed further. `pub(in path)` visibilities are not references.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// The crates checked for cycles: (name, source directory holding `lib.rs`).
const CRATES: [(&str, &str); 11] = [
    ("reactor", "reactor/src"),
    ("io-uring-compat", "io-uring-compat/src"),
    ("executor", "executor/src"),
    ("net", "net/src"),
    ("macros", "macros/src"),
    ("config", "config/src"),
    ("weir", "src"),
    ("pool", "clients/pool/src"),
    ("postgres", "clients/postgres/src"),
    ("redis", "clients/redis/src"),
    ("grpc", "clients/grpc/src"),
];

/// The runtime crates: `weir` and what it is built from. No arrow goes from them to a client.
const RUNTIME_CRATES: [&str; 7] = [
    "weir",
    "weir-net",
    "weir-executor",
    "weir-reactor",
    "weir-io-uring-compat",
    "weir-macros",
    "weir-config",
];

/// Where the clients live: every crate under it is a client.
const CLIENTS_DIR: &str = "clients/";

/// What the facade's modules (every file of `src/` but `lib.rs`, which re-exports) may use of
/// the runtime crates: an fd's readiness and the blocking pool, as a crate outside weir could.
/// A subsystem that needs more is a crate of its own (see ARCHITECTURE.md, "Where `fs`,
/// `process` and `signal` live").
const FACADE_SURFACE: [&str; 6] = [
    "weir_reactor::AsyncFd",
    "weir_reactor::Interest",
    "weir_reactor::Direction",
    "weir_executor::JoinHandle",
    "weir_executor::spawn_blocking",
    "weir_executor::Handle",
];

/// Directories whose files should stay short.
const SHORT_FILE_DIRS: [&str; 4] = [
    "reactor/src",
    "io-uring-compat/src",
    "executor/src",
    "net/src",
];

/// Files longer than this many lines argue in their module doc why they are one idea.
const LONG_FILE: usize = 500;

/// The marker of that argument, in the leading `//!` lines.
const ONE_IDEA: &str = "One idea:";

/// Whether an unargued long file fails the test. "About 500 lines" is a judgement (a file's
/// tests count too), so the check reports and leaves the call to review.
const LONG_FILES_FAIL: bool = false;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn rel(path: &Path) -> String {
    path.strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// Source text

/// `src` as chars with comments and the contents of string and character literals replaced by
/// spaces (newlines kept), so that offsets and line numbers still match the original.
fn strip(src: &[char]) -> Vec<char> {
    let n = src.len();
    let mut out = src.to_vec();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to.min(n)] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let at = |i: usize| src.get(i).copied().unwrap_or('\0');
    let ident_char = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < n {
        let c = src[i];
        if c == '/' && at(i + 1) == '/' {
            let end = (i..n).find(|&j| src[j] == '\n').unwrap_or(n);
            blank(&mut out, i, end);
            i = end;
        } else if c == '/' && at(i + 1) == '*' {
            let (mut j, mut depth) = (i + 2, 1);
            while j < n && depth > 0 {
                if src[j] == '/' && at(j + 1) == '*' {
                    depth += 1;
                    j += 2;
                } else if src[j] == '*' && at(j + 1) == '/' {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if (c == 'r' || ((c == 'b' || c == 'c') && at(i + 1) == 'r'))
            && (i == 0 || !ident_char(src[i - 1]))
            && raw_string_start(src, if c == 'r' { i + 1 } else { i + 2 }).is_some()
        {
            // r"…", r#"…"#, br"…", cr"…"
            let r = if c == 'r' { i + 1 } else { i + 2 };
            let (hashes, quote) = raw_string_start(src, r).expect("checked above");
            let mut j = quote + 1;
            let end = loop {
                if j >= n {
                    break n;
                }
                if src[j] == '"' && (1..=hashes).all(|k| at(j + k) == '#') {
                    break j;
                }
                j += 1;
            };
            blank(&mut out, quote + 1, end);
            i = end + 1 + hashes;
        } else if c == '"' {
            let mut j = i + 1;
            while j < n && src[j] != '"' {
                if src[j] == '\\' {
                    j += 1;
                }
                j += 1;
            }
            blank(&mut out, i + 1, j);
            i = j + 1;
        } else if c == '\'' {
            if at(i + 1) == '\\' {
                // An escaped char literal: '\n', '\'', '\u{1F600}'.
                let end = (i + 3..n).find(|&j| src[j] == '\'').unwrap_or(n);
                blank(&mut out, i + 1, end);
                i = end + 1;
            } else if at(i + 2) == '\'' {
                blank(&mut out, i + 1, i + 2);
                i += 3;
            } else {
                i += 1; // a lifetime or a label
            }
        } else {
            i += 1;
        }
    }
    out
}

/// At `i` (just after the `r` of a raw string), the number of `#`s and the index of the
/// opening quote, if a raw string starts there.
fn raw_string_start(src: &[char], i: usize) -> Option<(usize, usize)> {
    let hashes = src[i.min(src.len())..]
        .iter()
        .take_while(|&&c| c == '#')
        .count();
    (src.get(i + hashes) == Some(&'"')).then_some((hashes, i + hashes))
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Punct(char),
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    /// Offset (in chars) in the file.
    at: usize,
}

fn tokens(text: &[char]) -> Vec<Token> {
    let mut out = Vec::new();
    let ident_char = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_alphabetic() || c == '_' || (c == '$' && text.get(i + 1) == Some(&'c')) {
            let start = i;
            i += 1;
            while i < text.len() && ident_char(text[i]) {
                i += 1;
            }
            let word: String = text[start..i].iter().collect();
            let word = if word == "$crate" {
                "crate".into()
            } else {
                word
            };
            out.push(Token {
                tok: Tok::Ident(word),
                at: start,
            });
        } else if c.is_ascii_digit() {
            while i < text.len() && ident_char(text[i]) {
                i += 1;
            }
        } else if c == ':' && text.get(i + 1) == Some(&':') {
            out.push(Token {
                tok: Tok::Sep,
                at: i,
            });
            i += 2;
        } else {
            out.push(Token {
                tok: Tok::Punct(c),
                at: i,
            });
            i += 1;
        }
    }
    out
}

fn is_ident(t: Option<&Token>, word: &str) -> bool {
    matches!(t, Some(Token { tok: Tok::Ident(w), .. }) if w == word)
}

fn is_punct(t: Option<&Token>, p: char) -> bool {
    matches!(t, Some(Token { tok: Tok::Punct(c), .. }) if *c == p)
}

fn ident(t: Option<&Token>) -> Option<&str> {
    match t {
        Some(Token {
            tok: Tok::Ident(w), ..
        }) => Some(w.as_str()),
        _ => None,
    }
}

/// Reads the use tree starting at `toks[i]` with `prefix` already read; pushes every full path
/// (with the offset of its last segment) to `out` and returns the index after the tree.
fn use_tree(
    toks: &[Token],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, usize)>,
) -> usize {
    if matches!(toks.get(i), Some(Token { tok: Tok::Sep, .. })) {
        i += 1; // `use ::std::…`
    }
    loop {
        let t = toks.get(i);
        if let Some(w) = ident(t) {
            let at = toks[i].at;
            prefix.push(w.to_string());
            i += 1;
            if matches!(toks.get(i), Some(Token { tok: Tok::Sep, .. })) {
                i += 1;
                continue;
            }
            if is_ident(toks.get(i), "as") {
                i += 2;
            }
            out.push((prefix, at));
            return i;
        } else if is_punct(t, '{') {
            i += 1;
            while i < toks.len() && !is_punct(toks.get(i), '}') {
                let before = i;
                i = use_tree(toks, i, prefix.clone(), out);
                if is_punct(toks.get(i), ',') {
                    i += 1;
                }
                if i == before {
                    i += 1; // not a use tree; do not loop
                }
            }
            return i + 1;
        } else if is_punct(t, '*') {
            if !prefix.is_empty() {
                out.push((prefix, toks[i].at));
            }
            return i + 1;
        } else {
            return i; // `use<'a>` bounds and the like
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The module tree and the references

/// A module path below the crate root (`[]` is the root).
type ModPath = Vec<String>;

/// One path that names a module of the crate.
#[derive(Clone, Debug)]
struct Ref {
    /// The module whose code holds the path (inline modules included).
    from: ModPath,
    /// The path as written, from its anchor (`crate`, `super`, `self`).
    segs: Vec<String>,
    file: PathBuf,
    line: usize,
}

#[derive(Debug, Default)]
struct Crate {
    name: String,
    modules: BTreeMap<ModPath, PathBuf>,
    refs: Vec<Ref>,
    /// `mod` declarations whose file was not found (e.g. behind a `cfg` for another target).
    missing: Vec<String>,
}

fn line_of(text: &[char], at: usize) -> usize {
    text[..at.min(text.len())]
        .iter()
        .filter(|&&c| c == '\n')
        .count()
        + 1
}

fn load_crate(name: &str, src_dir: &str) -> Crate {
    let mut krate = Crate {
        name: name.to_string(),
        ..Crate::default()
    };
    let dir = repo().join(src_dir);
    let root = dir.join("lib.rs");
    krate.modules.insert(Vec::new(), root.clone());
    scan_file(&mut krate, &root, Vec::new(), &dir);
    krate
}

/// Reads `file`, the source of `module`, whose `mod name;` children live in `child_dir`.
fn scan_file(krate: &mut Crate, file: &Path, module: ModPath, child_dir: &Path) {
    let original: Vec<char> = fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("reading {}: {e}", file.display()))
        .chars()
        .collect();
    let text = strip(&original);
    let toks = tokens(&text);
    // Inline modules open at this file: (name, brace depth inside them).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut children = Vec::new();
    let here = |inline: &[(String, usize)]| -> ModPath {
        let mut m = module.clone();
        m.extend(inline.iter().map(|(n, _)| n.clone()));
        m
    };
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        match &t.tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if inline.last().is_some_and(|&(_, d)| d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(w) if w == "mod" => {
                if let Some(name) = ident(toks.get(i + 1)) {
                    let name = name.to_string();
                    if is_punct(toks.get(i + 2), '{') {
                        let mut m = here(&inline);
                        m.push(name.clone());
                        krate.modules.entry(m).or_insert_with(|| file.to_path_buf());
                        inline.push((name, depth + 1));
                        i += 2;
                        continue;
                    } else if is_punct(toks.get(i + 2), ';') {
                        let path_attr = path_attribute(&original, &text, &toks, i);
                        let mut dir = child_dir.to_path_buf();
                        for (n, _) in &inline {
                            dir.push(n);
                        }
                        children.push((here(&inline), name, dir, path_attr, line_of(&text, t.at)));
                        i += 3;
                        continue;
                    }
                }
            }
            Tok::Ident(w) if w == "use" => {
                let mut paths = Vec::new();
                let end = use_tree(&toks, i + 1, Vec::new(), &mut paths);
                for (segs, at) in paths {
                    if matches!(segs[0].as_str(), "crate" | "super" | "self") {
                        krate.refs.push(Ref {
                            from: here(&inline),
                            segs,
                            file: file.to_path_buf(),
                            line: line_of(&text, at),
                        });
                    }
                }
                i = end.max(i + 1);
                continue;
            }
            Tok::Ident(w)
                if matches!(w.as_str(), "crate" | "super" | "self")
                    && matches!(toks.get(i + 1), Some(Token { tok: Tok::Sep, .. }))
                    && !(i >= 1 && matches!(toks[i - 1].tok, Tok::Sep))
                    && !(i >= 2
                        && is_ident(toks.get(i - 1), "in")
                        && is_punct(toks.get(i - 2), '(')) =>
            {
                let mut segs = vec![w.clone()];
                let mut j = i + 1;
                while matches!(toks.get(j), Some(Token { tok: Tok::Sep, .. })) {
                    match ident(toks.get(j + 1)) {
                        Some(s) => {
                            segs.push(s.to_string());
                            j += 2;
                        }
                        None => break,
                    }
                }
                krate.refs.push(Ref {
                    from: here(&inline),
                    segs,
                    file: file.to_path_buf(),
                    line: line_of(&text, t.at),
                });
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    for (parent, name, dir, path_attr, line) in children {
        let mut m = parent;
        m.push(name.clone());
        // A `#[path]` file is relative to this file's directory and holds its children next
        // to it, like a `mod.rs`.
        let found = match path_attr {
            Some(p) => {
                let f = file.parent().expect("a file has a directory").join(p);
                let d = f.parent().expect("a file has a directory").to_path_buf();
                Some((f, d))
            }
            None => {
                let flat = dir.join(format!("{name}.rs"));
                let nested = dir.join(&name).join("mod.rs");
                if flat.is_file() {
                    Some((flat, dir.join(&name)))
                } else if nested.is_file() {
                    Some((nested, dir.join(&name)))
                } else {
                    None
                }
            }
        };
        match found {
            Some((f, d)) if f.is_file() => {
                let seen = krate.modules.get(&m) == Some(&f);
                krate.modules.insert(m.clone(), f.clone());
                if !seen {
                    scan_file(krate, &f, m, &d);
                }
            }
            _ => krate
                .missing
                .push(format!("{}:{line}: mod {name}; (no file found)", rel(file))),
        }
    }
}

/// The value of a `#[path = "…"]` among the attributes of the `mod` at `toks[i]`.
fn path_attribute(original: &[char], text: &[char], toks: &[Token], i: usize) -> Option<String> {
    // The attributes and visibility before `mod` hold no `;`, `{` or `}`.
    let start = toks[..i]
        .iter()
        .rposition(|t| matches!(t.tok, Tok::Punct(';' | '{' | '}')))
        .map_or(0, |p| p + 1);
    let item = &toks[start..i];
    let k = item.windows(3).position(|w| {
        is_ident(Some(&w[0]), "path") && is_punct(Some(&w[1]), '=') && is_punct(Some(&w[2]), '"')
    })?;
    let open = item[k + 2].at;
    let close = (open + 1..text.len()).find(|&j| text[j] == '"')?;
    Some(original[open + 1..close].iter().collect())
}

/// The deepest module of `krate` that `segs`, written in module `from`, names.
fn resolve(krate: &Crate, from: &[String], segs: &[String]) -> Option<ModPath> {
    let mut cur: ModPath = match segs[0].as_str() {
        "crate" => Vec::new(),
        "self" => from.to_vec(),
        "super" => from.get(..from.len().checked_sub(1)?)?.to_vec(),
        _ => return None,
    };
    let mut rest = &segs[1..];
    while rest.first().is_some_and(|s| s == "super") {
        cur.pop()?;
        rest = &rest[1..];
    }
    for seg in rest {
        if seg == "self" {
            continue;
        }
        cur.push(seg.clone());
        if !krate.modules.contains_key(&cur) {
            cur.pop();
            break;
        }
    }
    Some(cur)
}

/// One reference that makes a sibling edge.
#[derive(Clone, Debug)]
struct Evidence {
    file: PathBuf,
    line: usize,
    path: String,
}

impl std::fmt::Display for Evidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{} ({})", rel(&self.file), self.line, self.path)
    }
}

/// A path as written, without the `self` a use group adds (`crate::task::{self, …}`).
fn display_path(segs: &[String]) -> String {
    let end = if segs.len() > 1 && segs.last().is_some_and(|s| s == "self") {
        segs.len() - 1
    } else {
        segs.len()
    };
    segs[..end].join("::")
}

/// Per parent module: its children's graph, edge (A, B) → the first reference found.
type Graphs = BTreeMap<ModPath, BTreeMap<(String, String), Evidence>>;

fn sibling_graphs(krate: &Crate) -> Graphs {
    let mut graphs = Graphs::new();
    // Every module with children gets a (possibly empty) graph.
    for m in krate.modules.keys() {
        if let Some((_, parent)) = m.split_last() {
            graphs.entry(parent.to_vec()).or_default();
        }
    }
    for r in &krate.refs {
        let Some(to) = resolve(krate, &r.from, &r.segs) else {
            continue;
        };
        let common = r.from.iter().zip(&to).take_while(|(a, b)| a == b).count();
        if common < r.from.len() && common < to.len() {
            graphs
                .entry(r.from[..common].to_vec())
                .or_default()
                .entry((r.from[common].clone(), to[common].clone()))
                .or_insert_with(|| Evidence {
                    file: r.file.clone(),
                    line: r.line,
                    path: display_path(&r.segs),
                });
        }
    }
    graphs
}

/// Every elementary cycle of `edges`, each as its nodes starting from its smallest.
fn cycles(edges: &BTreeMap<(String, String), Evidence>) -> Vec<Vec<String>> {
    let mut adj: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        adj.entry(a.as_str()).or_default().push(b.as_str());
    }
    let mut found = Vec::new();
    let nodes: Vec<&str> = adj.keys().copied().collect();
    for &start in &nodes {
        // Cycles whose smallest node is `start`: search only nodes above it.
        let mut path = vec![start];
        let mut stack = vec![adj.get(start).map_or(&[][..], Vec::as_slice).iter()];
        while let Some(top) = stack.last_mut() {
            match top.next().copied() {
                Some(n) if n == start => {
                    found.push(path.iter().map(|s| s.to_string()).collect());
                    if found.len() >= 1000 {
                        return found; // enough to fix first
                    }
                }
                Some(n) if n > start && !path.contains(&n) => {
                    path.push(n);
                    stack.push(adj.get(n).map_or(&[][..], Vec::as_slice).iter());
                }
                Some(_) => {}
                None => {
                    stack.pop();
                    path.pop();
                }
            }
        }
    }
    found
}

fn module_name(krate: &Crate, m: &[String]) -> String {
    std::iter::once(krate.name.as_str())
        .chain(m.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("::")
}

/// Every cycle of every crate, described with one reference per edge.
fn cycle_report() -> (usize, String) {
    let mut report = String::new();
    let mut count = 0;
    for (name, dir) in CRATES {
        let krate = load_crate(name, dir);
        for (parent, edges) in sibling_graphs(&krate) {
            for cycle in cycles(&edges) {
                count += 1;
                let mut ring = cycle.clone();
                ring.push(cycle[0].clone());
                let _ = writeln!(
                    report,
                    "{}: {}",
                    module_name(&krate, &parent),
                    ring.join(" → ")
                );
                for w in ring.windows(2) {
                    let e = &edges[&(w[0].clone(), w[1].clone())];
                    let _ = writeln!(report, "    {} → {}: {e}", w[0], w[1]);
                }
            }
        }
    }
    (count, report)
}

#[test]
fn no_import_cycles_between_sibling_modules() {
    let (count, report) = cycle_report();
    assert!(
        count == 0,
        "{count} import cycle(s) between sibling modules (a module's children must import \
         each other without a cycle; run scripts/module-graph.sh for the graphs):\n{report}"
    );
}

/// Prints every module's sibling graph with one reference per edge, the cycles, and the long
/// files. `scripts/module-graph.sh` runs it.
#[test]
fn print_graph() {
    let mut out = String::new();
    for (name, dir) in CRATES {
        let krate = load_crate(name, dir);
        let _ = writeln!(
            out,
            "== {name} ({dir}): {} modules, {} crate/super/self paths",
            krate.modules.len(),
            krate.refs.len()
        );
        for m in &krate.missing {
            let _ = writeln!(out, "   note: {m}");
        }
        for (parent, edges) in sibling_graphs(&krate) {
            let children: BTreeSet<&str> = krate
                .modules
                .keys()
                .filter(|m| m.len() == parent.len() + 1 && m.starts_with(&parent))
                .map(|m| m[parent.len()].as_str())
                .collect();
            if children.len() < 2 {
                continue;
            }
            let cyc = cycles(&edges);
            let _ = writeln!(
                out,
                "{}  [children: {}]{}",
                module_name(&krate, &parent),
                children.iter().copied().collect::<Vec<_>>().join(" "),
                if cyc.is_empty() {
                    "  acyclic".to_string()
                } else {
                    format!("  {} CYCLE(S)", cyc.len())
                }
            );
            for ((a, b), e) in &edges {
                let _ = writeln!(out, "    {a} → {b}   {e}");
            }
            for c in cyc {
                let mut ring = c.clone();
                ring.push(c[0].clone());
                let _ = writeln!(out, "    cycle: {}", ring.join(" → "));
            }
        }
        out.push('\n');
    }
    let (through, user) = executor_paths_into_the_reactor();
    let items = |paths: Vec<String>| -> BTreeSet<String> {
        paths
            .into_iter()
            .filter_map(|p| p.split_once(' ').map(|(_, path)| path.to_string()))
            .collect()
    };
    let through = items(through);
    let user = items(user.into_iter().map(|(at, _)| at).collect());
    let _ = writeln!(
        out,
        "== weir-executor -> weir-reactor: {} items through weir_reactor::{REACTOR_CONTRACT}, {} of the user API",
        through.len(),
        user.len()
    );
    for p in through.iter().chain(&user) {
        let _ = writeln!(out, "   {p}");
    }
    out.push('\n');
    let (long, _) = long_files();
    let _ = writeln!(
        out,
        "== files over {LONG_FILE} lines in {SHORT_FILE_DIRS:?}"
    );
    for l in long {
        let _ = writeln!(out, "   {l}");
    }
    println!("{out}");
}

// ---------------------------------------------------------------------------------------------
// ARCHITECTURE.md

/// The repository paths ARCHITECTURE.md names: backticked paths and link targets.
fn named_paths(md: &str) -> Vec<(usize, String)> {
    let top: BTreeSet<String> = fs::read_dir(repo())
        .expect("reading the repository root")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    let path_chars = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-'))
            && s.chars().any(|c| c.is_ascii_alphabetic())
    };
    let is_file = |s: &str| {
        [".rs", ".md", ".sh", ".toml", ".json", ".yml", ".svg"]
            .iter()
            .any(|e| s.ends_with(e))
    };
    let mut out = Vec::new();
    let mut fenced = false;
    for (n, line) in md.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut candidates: Vec<String> = line
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        let mut rest = line;
        while let Some(p) = rest.find("](") {
            let target = &rest[p + 2..];
            let end = target.find(')').unwrap_or(target.len());
            let t = &target[..end];
            if !t.contains("://") && !t.starts_with('#') && !t.starts_with("mailto:") {
                candidates.push(t.split('#').next().unwrap_or("").to_string());
            }
            rest = &target[end..];
        }
        for c in candidates {
            let first = c.split('/').next().unwrap_or("");
            if path_chars(&c)
                && !c.starts_with('/')
                && (is_file(&c) || (c.contains('/') && top.contains(first)))
            {
                out.push((n + 1, c));
            }
        }
    }
    out
}

#[test]
fn architecture_names_only_existing_paths() {
    let md_path = repo().join("ARCHITECTURE.md");
    let md = fs::read_to_string(&md_path).expect("reading ARCHITECTURE.md");
    let named = named_paths(&md);
    assert!(
        named.len() >= 10,
        "ARCHITECTURE.md names only {} paths; is the map still there?",
        named.len()
    );
    let missing: Vec<String> = named
        .iter()
        .filter(|(_, p)| !repo().join(p).exists())
        .map(|(line, p)| format!("ARCHITECTURE.md:{line}: `{p}`"))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist (fix the map, or do not backtick a \
         slash-separated word that is not a path):\n{}",
        missing.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Crates, scripts and the import map

/// A crate of the repository: its directory (relative, with a trailing `/`; `""` for the
/// root), its name, and the weir crates it depends on (normal and target-specific
/// dependencies; dev-dependencies apart).
#[derive(Debug)]
struct Manifest {
    dir: String,
    name: String,
    deps: BTreeSet<String>,
    dev_deps: BTreeSet<String>,
}

/// Every `Cargo.toml` of the repository (`target/` and hidden directories aside).
fn manifests() -> Vec<Manifest> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    walk(&path, out);
                }
            } else if name == "Cargo.toml" {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&repo(), &mut files);
    files.sort();
    files.iter().map(|f| read_manifest(f)).collect()
}

/// Reads the few things [`Manifest`] holds from a `Cargo.toml`, line by line (the manifests
/// keep one dependency per line).
fn read_manifest(file: &Path) -> Manifest {
    let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let dir = rel(file.parent().expect("a file has a parent"));
    let dir = if dir.is_empty() {
        dir
    } else {
        format!("{dir}/")
    };
    let mut m = Manifest {
        dir,
        name: String::new(),
        deps: BTreeSet::new(),
        dev_deps: BTreeSet::new(),
    };
    let mut section = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.trim_matches(|c| c == '[' || c == ']').to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if section == "package" && key == "name" {
            m.name = value.trim().trim_matches('"').to_string();
            continue;
        }
        let dep = key.split('.').next().unwrap_or("").trim_matches('"');
        if !dep.starts_with("weir") || dep == m.name {
            continue;
        }
        if section == "dependencies"
            || section == "build-dependencies"
            || (section.starts_with("target.") && section.ends_with(".dependencies"))
        {
            m.deps.insert(dep.to_string());
        } else if section == "dev-dependencies"
            || (section.starts_with("target.") && section.ends_with(".dev-dependencies"))
        {
            m.dev_deps.insert(dep.to_string());
        }
    }
    assert!(!m.name.is_empty(), "{}: no package name", file.display());
    m
}

/// The crates table of ARCHITECTURE.md: (crate name, directory, weir crates it depends on).
fn crate_rows(md: &str) -> Vec<(String, String, BTreeSet<String>)> {
    let start = md
        .find("## Crates")
        .expect("ARCHITECTURE.md has a `## Crates` section");
    let mut rows = Vec::new();
    for line in md[start..].lines().skip(1) {
        if line.starts_with("## ") {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | `name` | [`dir/`](…) | what | depends on |
        if cells.len() < 6 || !cells[1].starts_with("`weir") {
            continue;
        }
        let name = cells[1].trim_matches('`').to_string();
        let dir = cells[2]
            .split('`')
            .nth(1)
            .unwrap_or_else(|| panic!("the row of {name} names no directory"))
            .to_string();
        let dir = if dir == "src/" { String::new() } else { dir };
        // Names before a parenthesis or a semicolon are weir crates; what follows is other
        // dependencies, for the reader.
        let deps = cells[4]
            .split([';', '('])
            .next()
            .unwrap_or("")
            .split(',')
            .map(|d| d.trim().trim_matches('`'))
            .filter(|d| d.starts_with("weir"))
            .map(|d| d.split_whitespace().next().unwrap_or(d).to_string())
            .collect();
        rows.push((name, dir, deps));
    }
    rows
}

fn architecture() -> String {
    fs::read_to_string(repo().join("ARCHITECTURE.md")).expect("reading ARCHITECTURE.md")
}

#[test]
fn architecture_names_every_crate_and_script() {
    let md = architecture();
    let rows = crate_rows(&md);
    let mut problems = Vec::new();
    for m in manifests() {
        match rows.iter().find(|(name, _, _)| *name == m.name) {
            None => problems.push(format!(
                "the crate {} ({}Cargo.toml) has no row in the crates table",
                m.name, m.dir
            )),
            Some((_, dir, _)) if *dir != m.dir => problems.push(format!(
                "the row of {} names the directory `{dir}`; it is in `{}`",
                m.name, m.dir
            )),
            Some(_) => {}
        }
    }
    let named: BTreeSet<String> = named_paths(&md).into_iter().map(|(_, p)| p).collect();
    let scripts = fs::read_dir(repo().join("scripts")).expect("reading scripts/");
    for e in scripts.flatten() {
        let path = format!("scripts/{}", e.file_name().to_string_lossy());
        if !named.contains(&path) {
            problems.push(format!("the script `{path}` is not named"));
        }
    }
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md does not name everything that exists:\n{}",
        problems.join("\n")
    );
}

#[test]
fn crate_rows_list_the_weir_crates_each_depends_on() {
    let md = architecture();
    let rows = crate_rows(&md);
    let mut problems = Vec::new();
    for m in manifests() {
        if let Some((_, _, listed)) = rows.iter().find(|(name, _, _)| *name == m.name)
            && *listed != m.deps
        {
            problems.push(format!(
                "{}: the table says {listed:?}, {}Cargo.toml says {:?}",
                m.name, m.dir, m.deps
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "the crates table's `depends on` column is not what the manifests say:\n{}",
        problems.join("\n")
    );
}

#[test]
fn crate_map_has_no_cycle_and_no_arrow_from_the_runtime_to_the_clients() {
    let all = manifests();
    let clients: BTreeSet<&str> = all
        .iter()
        .filter(|m| m.dir.starts_with(CLIENTS_DIR))
        .map(|m| m.name.as_str())
        .collect();
    assert!(
        clients.len() >= 4,
        "no clients found under {CLIENTS_DIR}: {clients:?}"
    );
    let mut problems = Vec::new();
    for m in all
        .iter()
        .filter(|m| RUNTIME_CRATES.contains(&m.name.as_str()))
    {
        for d in m.deps.iter().chain(&m.dev_deps) {
            if clients.contains(d.as_str()) {
                problems.push(format!("{} depends on the client {d}", m.name));
            }
        }
        // Nor in its sources: a client's name in a path (`weir_redis::…`).
        let src = repo().join(&m.dir).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for f in files {
            let text: Vec<char> = fs::read_to_string(&f).unwrap_or_default().chars().collect();
            let code: String = strip(&text).into_iter().collect();
            for c in &clients {
                let path = format!("{}::", c.replace('-', "_"));
                if code.contains(&path) {
                    problems.push(format!("{} names `{path}`", rel(&f)));
                }
            }
        }
    }
    // Cycles over the normal dependencies (dev-dependencies may point back: a crate's tests
    // may use a crate built on it).
    let edges: BTreeMap<(String, String), Evidence> = all
        .iter()
        .flat_map(|m| {
            m.deps.iter().map(|d| {
                (
                    (m.name.clone(), d.clone()),
                    Evidence {
                        file: PathBuf::from(format!("{}Cargo.toml", m.dir)),
                        line: 0,
                        path: d.clone(),
                    },
                )
            })
        })
        .collect();
    for cycle in cycles(&edges) {
        problems.push(format!("a cycle: {}", cycle.join(" -> ")));
    }
    assert!(
        problems.is_empty(),
        "the crates' import map is broken:\n{}",
        problems.join("\n")
    );
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The runtime-crate paths a source names outside comments and literals, with their line:
/// `weir_reactor::{AsyncFd, Interest}` gives `weir_reactor::AsyncFd` and
/// `weir_reactor::Interest`.
fn runtime_crate_paths(text: &[char]) -> Vec<(usize, String)> {
    let code = strip(text);
    let toks = tokens(&code);
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        let Some(krate) = ident(Some(t)) else {
            continue;
        };
        if !matches!(krate, "weir_reactor" | "weir_executor" | "weir_net") {
            continue;
        }
        if i > 0 && matches!(toks.get(i - 1), Some(Token { tok: Tok::Sep, .. })) {
            continue; // `crate::weir_reactor` or a longer path: not this crate's root
        }
        let line = line_of(&code, t.at);
        let mut leaves = Vec::new();
        use_tree(&toks, i, Vec::new(), &mut leaves);
        for (segs, _) in leaves {
            // The crate and the item right below it, e.g. `weir_executor::spawn_blocking`.
            let path = segs.iter().take(2).cloned().collect::<Vec<_>>().join("::");
            out.push((line, path));
        }
    }
    out
}

#[test]
fn facade_modules_use_the_runtime_only_through_its_readiness_surface() {
    let mut files = Vec::new();
    rust_files(&repo().join("src"), &mut files);
    let mut problems = Vec::new();
    let mut seen = 0;
    for f in files.iter().filter(|f| !f.ends_with("src/lib.rs")) {
        let text: Vec<char> = fs::read_to_string(f).unwrap_or_default().chars().collect();
        for (line, path) in runtime_crate_paths(&text) {
            seen += 1;
            if !FACADE_SURFACE.contains(&path.as_str()) {
                problems.push(format!("{}:{line}: `{path}`", rel(f)));
            }
        }
    }
    assert!(
        seen > 0,
        "no facade module names a runtime crate: has the reading of paths broken?"
    );
    assert!(
        problems.is_empty(),
        "the facade's modules use the runtime crates beyond an fd's readiness and the \
         blocking pool (such a subsystem is a crate of its own, like net; or widen \
         FACADE_SURFACE and say why in ARCHITECTURE.md):\n{}",
        problems.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// The seam between the executor and the reactor

/// The module of `weir-reactor` that holds the worker's contract with its reactor: every item
/// `weir-executor` uses that a user never does. Hidden from the docs; only the executor (and
/// the reactor's own tests) may name it.
const REACTOR_CONTRACT: &str = "for_executor";

/// What `weir-executor` uses of `weir-reactor` besides [`REACTOR_CONTRACT`]: user API only,
/// each reached by weir's users too — the reactor handle (`Handle::worker_reactor`,
/// `TcpStream::from_std_with_handle`) and its counters, the backend and min_wait settings and
/// the Linux controls (`weir::runtime`, `weir::os::linux`), CPU placement
/// (`weir::runtime::allowed_cpus`, `pin_thread_to_cpu`), and the leaf side of the cooperative
/// budget (`weir::task::coop`, and what a leaf future of a user's own spends). Exactly what the
/// executor names: an entry it stops using fails the test too.
const EXECUTOR_USES_OF_REACTOR_USER_API: [&str; 13] = [
    "weir_reactor::ReactorHandle",
    "weir_reactor::ReactorStats",
    "weir_reactor::Backend",
    "weir_reactor::MinWait",
    "weir_reactor::os::linux::KernelBusyPoll",
    "weir_reactor::os::linux::ReactorHandleExt",
    "weir_reactor::thread::allowed_cpus",
    "weir_reactor::thread::pin_to_cpu",
    "weir_reactor::coop::BUDGET",
    "weir_reactor::coop::unconstrained",
    "weir_reactor::coop::has_budget_remaining",
    "weir_reactor::coop::poll_budget",
    "weir_reactor::coop::spend",
];

/// Reads the use tree at `toks[i]` as [`use_tree`] does, with each leaf's local name: the
/// last segment, the module before a `self`, or the name after `as`.
fn use_tree_named(
    toks: &[Token],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, String)>,
) -> usize {
    loop {
        let t = toks.get(i);
        if let Some(w) = ident(t) {
            prefix.push(w.to_string());
            i += 1;
            if matches!(toks.get(i), Some(Token { tok: Tok::Sep, .. })) {
                i += 1;
                continue;
            }
            let mut name = if w == "self" && prefix.len() > 1 {
                prefix[prefix.len() - 2].clone()
            } else {
                w.to_string()
            };
            if is_ident(toks.get(i), "as") {
                name = ident(toks.get(i + 1)).unwrap_or("_").to_string();
                i += 2;
            }
            if prefix.last().is_some_and(|s| s == "self") {
                prefix.pop();
            }
            out.push((prefix, name));
            return i;
        } else if is_punct(t, '{') {
            i += 1;
            while i < toks.len() && !is_punct(toks.get(i), '}') {
                let before = i;
                i = use_tree_named(toks, i, prefix.clone(), out);
                if is_punct(toks.get(i), ',') {
                    i += 1;
                }
                if i == before {
                    i += 1;
                }
            }
            return i + 1;
        } else {
            return i;
        }
    }
}

/// Every path into the crate `krate` (`weir_reactor`) that a source names outside comments and
/// literals, whole, with its line. A name a `use` brings in and the file then uses as a path's
/// first segment (`coop` of `use weir_reactor::coop;` in `coop::spend()`) stands for its
/// expansions (`weir_reactor::coop::spend`), not for itself.
fn crate_paths(text: &[char], krate: &str) -> Vec<(usize, Vec<String>)> {
    let code = strip(text);
    let toks = tokens(&code);
    let sep = |j: usize| matches!(toks.get(j), Some(Token { tok: Tok::Sep, .. }));
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if ident(Some(t)) != Some(krate) || (i > 0 && sep(i - 1)) {
            continue;
        }
        let line = line_of(&code, t.at);
        let mut leaves = Vec::new();
        use_tree_named(&toks, i, Vec::new(), &mut leaves);
        let imported = i > 0 && is_ident(toks.get(i - 1), "use");
        for (segs, name) in leaves {
            let mut expansions = Vec::new();
            if imported {
                for (j, u) in toks.iter().enumerate() {
                    if ident(Some(u)) == Some(name.as_str())
                        && !(j > 0 && sep(j - 1))
                        && sep(j + 1)
                        && let Some(next) = ident(toks.get(j + 2))
                    {
                        let mut p = segs.clone();
                        p.push(next.to_string());
                        expansions.push((line_of(&code, u.at), p));
                    }
                }
            }
            if expansions.is_empty() {
                out.push((line, segs));
            } else {
                out.extend(expansions);
            }
        }
    }
    out
}

fn starts_with(path: &[String], prefix: &str) -> bool {
    let p: Vec<&str> = prefix.split("::").collect();
    path.len() >= p.len() && path.iter().zip(&p).all(|(a, b)| a == b)
}

/// The executor's paths into `weir-reactor`: (through the contract module, into the user API),
/// each as `file:line path`.
fn executor_paths_into_the_reactor() -> (Vec<String>, Vec<(String, String)>) {
    let contract = format!("weir_reactor::{REACTOR_CONTRACT}");
    let mut files = Vec::new();
    rust_files(&repo().join("executor/src"), &mut files);
    files.sort();
    let (mut through, mut other) = (Vec::new(), Vec::new());
    for f in files {
        let text: Vec<char> = fs::read_to_string(&f).unwrap_or_default().chars().collect();
        for (line, path) in crate_paths(&text, "weir_reactor") {
            let at = format!("{}:{line} {}", rel(&f), path.join("::"));
            if starts_with(&path, &contract) {
                through.push(at);
            } else {
                other.push((at, path.join("::")));
            }
        }
    }
    (through, other)
}

#[test]
fn the_executor_reaches_the_reactor_s_non_user_items_only_through_its_contract_module() {
    let (through, other) = executor_paths_into_the_reactor();
    assert!(
        through.len() >= 10,
        "the executor names weir_reactor::{REACTOR_CONTRACT} only {} times: has the reading of \
         paths broken?",
        through.len()
    );
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    for (at, path) in &other {
        let segs: Vec<String> = path.split("::").map(str::to_string).collect();
        match EXECUTOR_USES_OF_REACTOR_USER_API
            .iter()
            .find(|allowed| starts_with(&segs, allowed))
        {
            Some(allowed) => {
                used.insert(*allowed);
            }
            None => problems.push(format!(
                "{at}: neither through the contract module nor in the list of user API"
            )),
        }
    }
    for allowed in EXECUTOR_USES_OF_REACTOR_USER_API {
        if !used.contains(allowed) {
            problems.push(format!(
                "`{allowed}` is listed in EXECUTOR_USES_OF_REACTOR_USER_API, and the executor \
                 no longer uses it"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "the executor reaches weir-reactor beyond its user API other than through \
         weir_reactor::{REACTOR_CONTRACT} (an item only the runtime may use belongs in \
         reactor/src/{REACTOR_CONTRACT}.rs; a new user item the executor uses belongs in \
         EXECUTOR_USES_OF_REACTOR_USER_API):\n{}",
        problems.join("\n")
    );
}

#[test]
fn only_the_executor_uses_the_reactor_s_contract_module() {
    let lib = fs::read_to_string(repo().join("reactor/src/lib.rs")).expect("reactor/src/lib.rs");
    assert!(
        lib.contains(&format!("#[doc(hidden)]\npub mod {REACTOR_CONTRACT};")),
        "reactor/src/lib.rs declares `#[doc(hidden)] pub mod {REACTOR_CONTRACT};`"
    );
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    walk(&path, out);
                }
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&repo(), &mut files);
    files.sort();
    // The executor, and the reactor itself with its own tests (they test the contract).
    let allowed = ["executor/", "reactor/"];
    let mut problems = Vec::new();
    for f in files {
        let r = rel(&f);
        if allowed.iter().any(|a| r.starts_with(a)) {
            continue;
        }
        let text: Vec<char> = fs::read_to_string(&f).unwrap_or_default().chars().collect();
        let code = strip(&text);
        for t in tokens(&code) {
            if ident(Some(&t)) == Some(REACTOR_CONTRACT) {
                problems.push(format!("{r}:{}", line_of(&code, t.at)));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "weir_reactor::{REACTOR_CONTRACT} is the worker's contract with its reactor, for \
         weir-executor alone; these files name it (use the user API, or go through the \
         executor):\n{}",
        problems.join("\n")
    );
}

#[test]
fn crate_paths_expand_imported_modules() {
    let src: Vec<char> = "use weir_reactor::coop;\nuse weir_reactor::for_executor::{self, Driver as D};\n\
                          fn f() { coop::spend(); for_executor::budget(|| ()); weir_reactor::Backend::Epoll; }"
        .chars()
        .collect();
    let got: Vec<String> = crate_paths(&src, "weir_reactor")
        .into_iter()
        .map(|(line, p)| format!("{line} {}", p.join("::")))
        .collect();
    assert_eq!(
        got,
        [
            "3 weir_reactor::coop::spend",
            "3 weir_reactor::for_executor::budget",
            "2 weir_reactor::for_executor::Driver",
            "3 weir_reactor::Backend::Epoll",
        ]
    );
}

/// A heading's anchor as GitHub makes it: lower case, spaces to `-`, punctuation other than
/// `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn links_into_the_bench_readme_name_existing_headings() {
    let bench = fs::read_to_string(repo().join("bench/README.md")).expect("bench/README.md");
    let mut fenced = false;
    let mut anchors = BTreeSet::new();
    for line in bench.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            anchors.insert(anchor(line.trim_start_matches('#')));
        }
    }
    let mut pages = vec![PathBuf::from("README.md"), PathBuf::from("ARCHITECTURE.md")];
    for dir in [
        "docs",
        "clients/pool",
        "clients/postgres",
        "clients/redis",
        "clients/grpc",
    ] {
        for e in fs::read_dir(repo().join(dir))
            .into_iter()
            .flatten()
            .flatten()
        {
            if e.path().extension().is_some_and(|x| x == "md") {
                pages.push(PathBuf::from(rel(&e.path())));
            }
        }
    }
    let mut problems = Vec::new();
    let mut links = 0;
    for page in pages {
        let text = fs::read_to_string(repo().join(&page)).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            for (i, _) in line.match_indices("bench/README.md#") {
                let a: String = line[i + "bench/README.md#".len()..]
                    .chars()
                    .take_while(|&c| c != ')' && c != ' ' && c != '`')
                    .collect();
                links += 1;
                if !anchors.contains(&a) {
                    problems.push(format!("{}:{}: #{a}", page.display(), n + 1));
                }
            }
        }
    }
    assert!(
        links >= 3,
        "the README links its figures to bench/README.md"
    );
    assert!(
        problems.is_empty(),
        "links into bench/README.md name headings it does not have:\n{}",
        problems.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// docs.rs marks

/// The mark docs.rs shows a feature-gated item with: `#[cfg_attr(docsrs, doc(cfg(PRED)))]`,
/// whitespace removed, around the item's `cfg` predicate.
fn doc_cfg_mark(pred: &str) -> String {
    format!("#[cfg_attr(docsrs,doc(cfg({pred})))]")
}

/// The predicate of a `#[cfg(PRED)]` attribute (whitespace removed), if it is one.
fn cfg_predicate(attr: &str) -> Option<&str> {
    attr.strip_prefix("#[cfg(")?.strip_suffix(")]")
}

/// Every published crate (no `publish = false`): its name and its directory.
fn published_crates() -> Vec<(String, PathBuf)> {
    manifests()
        .into_iter()
        .filter(|m| {
            let text =
                fs::read_to_string(repo().join(&m.dir).join("Cargo.toml")).unwrap_or_default();
            !text.lines().any(|l| l.trim() == "publish = false")
        })
        .map(|m| (m.name.clone(), repo().join(&m.dir)))
        .collect()
}

/// One item of a source file as the marks check sees it: its outer attributes (whitespace
/// removed), whether it is public (`pub` without a restriction, a public field, an `impl`, an
/// exported macro), whether it is a `mod` (and its name, for `mod name;`), and where.
#[derive(Debug)]
struct MarkedItem {
    attrs: Vec<String>,
    public: bool,
    module: Option<String>,
    line: usize,
}

/// The items of `original` that carry attributes or are public, in order.
fn items_with_attributes(original: &[char]) -> Vec<MarkedItem> {
    let code = strip(original);
    let toks = tokens(&code);
    let mut out = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    let mut i = 0;
    // The previous token ends a statement or an item (or the file starts): an item may start.
    let boundary =
        |j: usize| j == 0 || matches!(toks[j - 1].tok, Tok::Punct(';' | '{' | '}' | ']'));
    while i < toks.len() {
        if is_punct(toks.get(i), '#') && is_punct(toks.get(i + 1), '[') {
            // An outer attribute: up to its matching `]`.
            let (mut j, mut depth) = (i + 1, 0usize);
            loop {
                match toks.get(j).map(|t| &t.tok) {
                    Some(Tok::Punct('[')) => depth += 1,
                    Some(Tok::Punct(']')) => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    None => break,
                    _ => {}
                }
                j += 1;
            }
            let end = toks.get(j).map_or(original.len(), |t| t.at + 1);
            let text: String = original[toks[i].at..end]
                .iter()
                .filter(|c| !c.is_whitespace())
                .collect();
            pending.push(text);
            i = j + 1;
            continue;
        }
        if !boundary(i) && pending.is_empty() {
            i += 1;
            continue;
        }
        let start = i;
        let mut public = false;
        let mut k = i;
        if is_ident(toks.get(k), "pub") {
            if is_punct(toks.get(k + 1), '(') {
                while k < toks.len() && !is_punct(toks.get(k), ')') {
                    k += 1;
                }
            } else {
                public = true;
            }
            k += 1;
        }
        while matches!(
            ident(toks.get(k)),
            Some("unsafe" | "async" | "const" | "extern")
        ) && ident(toks.get(k + 1)).is_some()
        {
            k += 1;
        }
        let keyword = ident(toks.get(k)).unwrap_or("");
        let mut module = None;
        match keyword {
            "impl" => public = true,
            "macro_rules" => public = pending.iter().any(|a| a == "#[macro_export]"),
            "mod" => {
                if is_punct(toks.get(k + 2), ';') {
                    module = ident(toks.get(k + 1)).map(str::to_string);
                }
            }
            "fn" | "struct" | "enum" | "union" | "trait" | "use" | "static" | "type" => {}
            "const" => {}
            _ => {
                // A public field (`pub name: T`) is public too; anything else is not an item.
                let field = public
                    && ident(toks.get(k)).is_some()
                    && is_punct(toks.get(k + 1), ':')
                    && !matches!(toks.get(k + 1), Some(Token { tok: Tok::Sep, .. }));
                if !field {
                    pending.clear();
                    i = start + 1;
                    continue;
                }
            }
        }
        if !pending.is_empty() || public || module.is_some() {
            out.push(MarkedItem {
                attrs: std::mem::take(&mut pending),
                public,
                module,
                line: line_of(&code, toks[start].at),
            });
        }
        i = k + 1;
    }
    out
}

/// The file of `mod name;` declared in `file`.
fn module_file(file: &Path, name: &str) -> Option<PathBuf> {
    let dir = match file.file_name().and_then(|f| f.to_str()) {
        Some("lib.rs" | "mod.rs" | "main.rs") => file.parent()?.to_path_buf(),
        _ => file.with_extension(""),
    };
    [
        dir.join(format!("{name}.rs")),
        dir.join(name).join("mod.rs"),
    ]
    .into_iter()
    .find(|f| f.is_file())
}

/// Checks `file` and the modules it declares: every public item under a `cfg` that names a
/// feature carries that predicate's docs.rs mark (or is hidden from the docs), and so does
/// every module declared under one, unless it is one side of an enabled/stub pair (a
/// `cfg(P)` module beside a `cfg(not(P))` one: the crate's private halves of one API).
fn check_marks(file: &Path, problems: &mut Vec<String>, seen: &mut usize) {
    let text: Vec<char> = fs::read_to_string(file)
        .unwrap_or_default()
        .chars()
        .collect();
    let items = items_with_attributes(&text);
    let feature_preds = |item: &MarkedItem| -> Vec<String> {
        item.attrs
            .iter()
            .filter_map(|a| cfg_predicate(a))
            .filter(|p| p.contains("feature="))
            .map(str::to_string)
            .collect()
    };
    // Every predicate a module of this file is declared under, for the pairs.
    let module_preds: Vec<String> = items
        .iter()
        .filter(|it| it.module.is_some())
        .flat_map(|it| {
            it.attrs
                .iter()
                .filter_map(|a| cfg_predicate(a).map(str::to_string))
        })
        .collect();
    for item in &items {
        let preds = feature_preds(item);
        let hidden = item.attrs.iter().any(|a| a == "#[doc(hidden)]");
        let paired = |p: &str| {
            module_preds
                .iter()
                .any(|q| q.contains(&format!("not({p})")) || p.contains(&format!("not({q})")))
        };
        let needs_marks = !preds.is_empty()
            && !hidden
            && (item.public || (item.module.is_some() && !preds.iter().any(|p| paired(p))));
        if needs_marks {
            *seen += 1;
            for p in &preds {
                if !item.attrs.contains(&doc_cfg_mark(p)) {
                    problems.push(format!(
                        "{}:{}: behind `cfg({p})` without `#[cfg_attr(docsrs, doc(cfg({p})))]`",
                        rel(file),
                        item.line
                    ));
                }
            }
        }
        if let Some(name) = &item.module
            && let Some(child) = module_file(file, name)
        {
            check_marks(&child, problems, seen);
        }
    }
}

#[test]
fn docs_rs_marks_every_feature_gated_item() {
    let mut problems = Vec::new();
    let mut seen = 0;
    let crates = published_crates();
    assert!(crates.len() >= 10, "published crates: {crates:?}");
    for (name, dir) in &crates {
        let lib = dir.join("src/lib.rs");
        let text = fs::read_to_string(&lib).unwrap_or_default();
        let flat: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if !flat.contains("#![cfg_attr(docsrs,feature(doc_cfg))]") {
            problems.push(format!(
                "{}: no `#![cfg_attr(docsrs, feature(doc_cfg))]`",
                rel(&lib)
            ));
        }
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
        let docs_rs = manifest
            .split("[package.metadata.docs.rs]")
            .nth(1)
            .map(|s| s.split("\n[").next().unwrap_or(""))
            .unwrap_or("");
        let flat: String = docs_rs.chars().filter(|c| !c.is_whitespace()).collect();
        if !flat.contains("all-features=true")
            || !flat.contains("rustdoc-args=[\"--cfg\",\"docsrs\"]")
        {
            problems.push(format!(
                "{name}: its Cargo.toml's [package.metadata.docs.rs] needs `all-features = true` \
                 and `rustdoc-args = [\"--cfg\", \"docsrs\"]`"
            ));
        }
        check_marks(&lib, &mut problems, &mut seen);
    }
    assert!(
        seen >= 10,
        "only {seen} feature-gated items found: has the reading of attributes broken?"
    );
    assert!(
        problems.is_empty(),
        "docs.rs would show these feature-gated items without the feature they need (add the \
         mark after the `cfg`, or `#[doc(hidden)]` for what is not for users):\n{}",
        problems.join("\n")
    );
}

#[test]
fn marks_are_read_from_attributes() {
    let src: Vec<char> = "#[cfg(feature = \"a\")]\n#[cfg_attr(docsrs, doc(cfg(feature = \"a\")))]\n\
                          pub mod m;\n#[cfg(feature = \"b\")]\nmod x;\n#[cfg(not(feature = \"b\"))]\nmod y;\n\
                          fn f() -> impl Sized {}\nimpl S { #[cfg(feature = \"c\")] pub fn g() {} }\n\
                          #[cfg(feature = \"d\")] pub(crate) fn h() {}"
        .chars()
        .collect();
    let got: Vec<String> = items_with_attributes(&src)
        .iter()
        .map(|it| {
            format!(
                "{} {} {:?} {}",
                it.line,
                it.public,
                it.module,
                it.attrs.join(" ")
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            "3 true Some(\"m\") #[cfg(feature=\"a\")] #[cfg_attr(docsrs,doc(cfg(feature=\"a\")))]",
            "5 false Some(\"x\") #[cfg(feature=\"b\")]",
            "7 false Some(\"y\") #[cfg(not(feature=\"b\"))]",
            "9 true None ",
            "9 true None #[cfg(feature=\"c\")]",
            "10 false None #[cfg(feature=\"d\")]",
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Long files

/// The long files of [`SHORT_FILE_DIRS`] as report lines: (all of them, those without an
/// argument).
fn long_files() -> (Vec<String>, Vec<String>) {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .filter_map(|e| Some(e.ok()?.path()))
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    for d in SHORT_FILE_DIRS {
        walk(&repo().join(d), &mut files);
    }
    let (mut report, mut unargued) = (Vec::new(), Vec::new());
    for f in files {
        let text = fs::read_to_string(&f).expect("reading a source file");
        let lines = text.lines().count();
        if lines <= LONG_FILE {
            continue;
        }
        let argued = text
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .any(|l| l.contains(ONE_IDEA));
        let line = format!(
            "{} ({lines} lines){}",
            rel(&f),
            if argued {
                format!(": argues `{ONE_IDEA}`")
            } else {
                format!(": no `{ONE_IDEA}` in its module doc")
            }
        );
        if !argued {
            unargued.push(line.clone());
        }
        report.push(line);
    }
    (report, unargued)
}

#[test]
fn long_files_argue_why_they_are_one_idea() {
    let (report, unargued) = long_files();
    for l in &report {
        eprintln!("long file: {l}");
    }
    if LONG_FILES_FAIL {
        assert!(
            unargued.is_empty(),
            "files over {LONG_FILE} lines without `{ONE_IDEA}` in their module doc:\n{}",
            unargued.join("\n")
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The checker checked

#[test]
fn strip_blanks_comments_and_literals() {
    let src: Vec<char> =
        "a // crate::x\nb /* crate::y /* nested */ */ \"crate::z\" r#\"crate::w\"# '{' 'a c::d"
            .chars()
            .collect();
    let stripped = strip(&src);
    assert_eq!(stripped.len(), src.len());
    let s: String = stripped.into_iter().collect();
    assert!(!s.contains("crate::"));
    assert!(!s.contains('{'));
    assert!(s.contains("'a c::d"), "a lifetime stays: {s:?}");
    assert_eq!(s.lines().count(), 2);
}

#[test]
fn use_trees_and_inline_paths_resolve_to_the_deepest_module() {
    let mut krate = Crate::default();
    for m in [
        &[][..],
        &["a"],
        &["a", "inner"],
        &["b"],
        &["b", "deep"],
        &["c"],
    ] {
        krate
            .modules
            .insert(m.iter().map(|s| s.to_string()).collect(), PathBuf::new());
    }
    let src: Vec<char> = "use crate::{b::deep::{X, self}, c as cc};\nuse super::b::*;\n\
                          fn f() { self::inner::g(); super::super::c::h::<T>(); }\n\
                          pub(in crate::c) fn hidden() {}"
        .chars()
        .collect();
    let toks = tokens(&strip(&src));
    let mut paths = Vec::new();
    let end = use_tree(&toks, 1, Vec::new(), &mut paths);
    assert!(is_punct(toks.get(end), ';'));
    let got: Vec<String> = paths.iter().map(|(p, _)| p.join("::")).collect();
    assert_eq!(
        got,
        ["crate::b::deep::X", "crate::b::deep::self", "crate::c"]
    );
    let from = vec!["a".to_string(), "inner".to_string()];
    let r = |s: &str| {
        let segs: Vec<String> = s.split("::").map(str::to_string).collect();
        resolve(&krate, &from, &segs).map(|m| m.join("::"))
    };
    assert_eq!(r("crate::b::deep::X").as_deref(), Some("b::deep"));
    assert_eq!(r("crate::b::deep::self").as_deref(), Some("b::deep"));
    assert_eq!(r("super::super::c::h").as_deref(), Some("c"));
    assert_eq!(r("self::g").as_deref(), Some("a::inner"));
    assert_eq!(r("super").as_deref(), Some("a"));
    assert_eq!(r("super::super::super::x"), None);
}

#[test]
fn cycles_are_found_with_their_evidence() {
    let e = |a: &str, b: &str| {
        (
            (a.to_string(), b.to_string()),
            Evidence {
                file: PathBuf::from("x.rs"),
                line: 1,
                path: format!("crate::{b}"),
            },
        )
    };
    let edges: BTreeMap<_, _> = [
        e("runtime", "context"),
        e("context", "runtime"),
        e("runtime", "worker"),
        e("worker", "blocking"),
        e("blocking", "runtime"),
        e("queue", "loom"),
    ]
    .into_iter()
    .collect();
    let mut found: Vec<String> = cycles(&edges).iter().map(|c| c.join(" ")).collect();
    found.sort();
    assert_eq!(found, ["blocking runtime worker", "context runtime"]);
}
