//! The house's shape, checked (issue 38): no import circles among the
//! modules of any crate, and no crate depending on one above it in the layer
//! order docs/architecture.md declares ("Layer order"), nor a crate the
//! order does not list.
//!
//! Module imports are read from the sources with `syn`: every path that
//! starts at `crate::`, `super::`, `self::` or a child module, in `use`
//! items and in code, resolved through `pub use` re-exports to the module
//! that holds the item. A module's use of its own ancestors or descendants
//! is containment, not a dependency between peers, and is not counted;
//! `#[cfg(test)]` items are left out (tests may use anything).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use syn::visit::Visit;

fn workspace() -> PathBuf {
    integration::c_program::workspace()
}

// ---- the layer order ----------------------------------------------------

/// The layers of docs/architecture.md's "Layer order" table, lowest first:
/// each row `| N | crate, crate |`.
fn declared_layers() -> BTreeMap<String, usize> {
    let doc = std::fs::read_to_string(workspace().join("docs/architecture.md"))
        .expect("read docs/architecture.md");
    let section = doc
        .split("## Layer order")
        .nth(1)
        .expect("docs/architecture.md has a \"## Layer order\" section");
    let mut layers = BTreeMap::new();
    for line in section.lines().skip_while(|l| !l.starts_with('|')) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let Ok(n) = cells[0].parse::<usize>() else {
            continue; // the header and its rule
        };
        for name in cells[1].split(',') {
            let name = name.trim().trim_matches('`');
            let before = layers.insert(name.to_string(), n);
            assert!(
                before.is_none(),
                "{name} is listed twice in the layer order"
            );
        }
    }
    assert!(!layers.is_empty(), "the layer order table is empty");
    layers
}

/// Every workspace package and its normal dependencies on other workspace
/// packages, from `cargo metadata`.
fn workspace_dependencies() -> BTreeMap<String, Vec<String>> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace())
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let packages = m["packages"].as_array().expect("packages");
    let ours: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["kind"].is_null()) // normal, not dev or build
                .filter_map(|d| d["name"].as_str())
                .filter(|n| ours.contains(n))
                .map(str::to_string)
                .collect();
            (p["name"].as_str().unwrap_or_default().to_string(), deps)
        })
        .collect()
}

#[test]
fn no_crate_depends_on_one_above_it_and_every_crate_has_a_layer() {
    let layers = declared_layers();
    let deps = workspace_dependencies();
    let mut wrong = Vec::new();
    for (krate, uses) in &deps {
        let Some(&mine) = layers.get(krate) else {
            wrong.push(format!(
                "{krate}: not in docs/architecture.md's layer order"
            ));
            continue;
        };
        for dep in uses {
            match layers.get(dep) {
                Some(&theirs) if theirs < mine => {}
                Some(&theirs) => wrong.push(format!(
                    "{krate} (layer {mine}) depends on {dep} (layer {theirs}): only lower layers"
                )),
                None => {} // reported as unlisted on its own row
            }
        }
    }
    for listed in layers.keys() {
        if !deps.contains_key(listed) {
            wrong.push(format!(
                "{listed}: in the layer order but not a workspace crate"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "layer order broken:\n{}",
        wrong.join("\n")
    );
}

// ---- module import circles ----------------------------------------------

/// One module of a crate: its path (`a::b`), the file it is in, its child
/// modules, and its re-exports (name -> the path it names).
#[derive(Default)]
struct Module {
    file: PathBuf,
    children: BTreeSet<String>,
    reexports: BTreeMap<String, Vec<String>>,
    /// Paths this module's code names (absolute in the crate, as segments).
    uses: Vec<Vec<String>>,
}

type Tree = BTreeMap<Vec<String>, Module>;

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta.require_list().is_ok_and(|l| {
                l.tokens
                    .to_string()
                    .split([' ', ',', '(', ')'])
                    .any(|t| t == "test")
            })
    })
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Collects, relative to the module being read, the paths its code names.
struct Paths {
    found: Vec<Vec<String>>,
}

impl Paths {
    fn tree(&mut self, prefix: &mut Vec<String>, t: &syn::UseTree) {
        match t {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut v = prefix.clone();
                if n.ident != "self" {
                    v.push(n.ident.to_string());
                }
                self.found.push(v);
            }
            syn::UseTree::Rename(r) => {
                let mut v = prefix.clone();
                v.push(r.ident.to_string());
                self.found.push(v);
            }
            syn::UseTree::Glob(_) => self.found.push(prefix.clone()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.tree(prefix, t);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if !is_cfg_test(&u.attrs) {
            self.tree(&mut Vec::new(), &u.tree);
        }
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        self.found
            .push(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // Inline modules other than tests belong to this file's module.
        if !is_cfg_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_cfg_test(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if !is_cfg_test(&i.attrs) {
            syn::visit::visit_item_impl(self, i);
        }
    }
}

/// Read module `path` from `file` (and its children, recursively) into `tree`.
fn read_module(tree: &mut Tree, path: Vec<String>, file: &Path, is_mod_rs: bool) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let dir = if is_mod_rs {
        file.parent().expect("a directory").to_path_buf()
    } else {
        file.with_extension("")
    };
    let mut m = Module {
        file: file.to_path_buf(),
        ..Module::default()
    };
    let mut children = Vec::new();
    for item in &ast.items {
        match item {
            syn::Item::Mod(md) if md.content.is_none() && !is_cfg_test(&md.attrs) => {
                let name = md.ident.to_string();
                let child = match path_attr(&md.attrs) {
                    Some(p) => (dir.join(p), true),
                    None if dir.join(format!("{name}.rs")).exists() => {
                        (dir.join(format!("{name}.rs")), false)
                    }
                    None => (dir.join(&name).join("mod.rs"), true),
                };
                m.children.insert(name.clone());
                children.push((name, child));
            }
            syn::Item::Use(u) if !matches!(u.vis, syn::Visibility::Inherited) => {
                let mut p = Paths { found: Vec::new() };
                p.tree(&mut Vec::new(), &u.tree);
                for f in p.found {
                    if let Some(last) = f.last() {
                        m.reexports.insert(last.clone(), f.clone());
                    }
                }
            }
            _ => {}
        }
    }
    let mut p = Paths { found: Vec::new() };
    p.visit_file(&ast);
    m.uses = p.found;
    tree.insert(path.clone(), m);
    for (name, (file, is_mod_rs)) in children {
        let mut child = path.clone();
        child.push(name);
        read_module(tree, child, &file, is_mod_rs);
    }
}

/// The module that holds what `segs` names from module `from` (through
/// re-exports), or None for a path outside the crate.
fn resolve(tree: &Tree, from: &[String], segs: &[String], depth: u32) -> Option<Vec<String>> {
    let (mut at, rest): (Vec<String>, &[String]) = match segs.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &segs[1..]),
        Some("self") => (from.to_vec(), &segs[1..]),
        Some("super") => {
            let mut at = from.to_vec();
            let mut rest = segs;
            while rest.first().map(String::as_str) == Some("super") {
                at.pop()?;
                rest = &rest[1..];
            }
            (at, rest)
        }
        Some(first) if tree.get(from)?.children.contains(first) => (from.to_vec(), segs),
        _ => return None,
    };
    let mut i = 0;
    while i < rest.len() {
        let m = tree.get(&at)?;
        if m.children.contains(&rest[i]) {
            at.push(rest[i].clone());
            i += 1;
            continue;
        }
        if let Some(target) = m.reexports.get(&rest[i]) {
            if depth < 8 {
                let mut full = target.clone();
                full.extend_from_slice(&rest[i + 1..]);
                if let Some(r) = resolve(tree, &at, &full, depth + 1) {
                    return Some(r);
                }
            }
        }
        break;
    }
    Some(at)
}

/// Strongly connected components of more than one module (Tarjan).
fn circles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    struct T<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on: BTreeSet<&'a Vec<String>>,
        out: Vec<Vec<Vec<String>>>,
    }
    impl<'a> T<'a> {
        fn go(&mut self, v: &'a Vec<String>) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                let w = self.edges.get_key_value(w).map(|(k, _)| k).unwrap_or(w);
                if !self.index.contains_key(w) {
                    self.go(w);
                    let l = self.low[w].min(self.low[v]);
                    self.low.insert(v, l);
                } else if self.on.contains(w) {
                    let l = self.index[w].min(self.low[v]);
                    self.low.insert(v, l);
                }
            }
            if self.low[v] == self.index[v] {
                let mut c = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    c.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if c.len() > 1 {
                    c.sort();
                    self.out.push(c);
                }
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            t.go(v);
        }
    }
    t.out
}

/// The import circles of the crate whose root file is `root`.
fn crate_circles(root: &Path) -> Vec<String> {
    let mut tree = Tree::new();
    read_module(&mut tree, Vec::new(), root, true);
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (path, m) in &tree {
        let e = edges.entry(path.clone()).or_default();
        for u in &m.uses {
            let Some(to) = resolve(&tree, path, u, 0) else {
                continue;
            };
            let related = to.starts_with(path) || path.starts_with(&to);
            if !related {
                e.insert(to);
            }
        }
    }
    let name = |p: &Vec<String>| {
        let f = tree[p]
            .file
            .strip_prefix(workspace())
            .unwrap_or(&tree[p].file);
        format!("{} ({})", p.join("::"), f.display())
    };
    circles(&edges)
        .into_iter()
        .map(|c| c.iter().map(name).collect::<Vec<_>>().join(" <-> "))
        .collect()
}

/// Every crate root of the workspace: src/lib.rs and src/main.rs of each
/// member (a binary is a crate of its own).
fn crate_roots() -> Vec<PathBuf> {
    let cargo = std::fs::read_to_string(workspace().join("Cargo.toml")).expect("Cargo.toml");
    let members = cargo
        .split("members = [")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .expect("workspace members");
    members
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .flat_map(|m| ["src/lib.rs", "src/main.rs"].map(|f| workspace().join(m).join(f)))
        .filter(|p| p.exists())
        .collect()
}

#[test]
fn no_module_imports_form_a_circle_in_any_crate() {
    let found: Vec<String> = crate_roots()
        .iter()
        .flat_map(|r| crate_circles(r))
        .collect();
    assert!(
        found.is_empty(),
        "import circles (break each by moving the shared piece into a lower module):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_circle_finder_finds_a_circle_and_passes_a_tree() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let w = |f: &str, s: &str| std::fs::write(dir.path().join(f), s).expect("write");
    w("lib.rs", "mod a;\nmod b;\nmod c;\npub use c::Thing;\n");
    w("a.rs", "use crate::b::f;\npub fn g() { f() }\n");
    w("b.rs", "pub fn f() { crate::Thing::new(); }\n");
    w(
        "c.rs",
        "pub struct Thing;\nimpl Thing { pub fn new() { super::a::g() } }\n",
    );
    let found = crate_circles(&dir.path().join("lib.rs"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("a (") && found[0].contains("b (") && found[0].contains("c ("));
    // Break it: c no longer reaches back to a.
    w(
        "c.rs",
        "pub struct Thing;\nimpl Thing { pub fn new() {} }\n",
    );
    assert!(crate_circles(&dir.path().join("lib.rs")).is_empty());
}
