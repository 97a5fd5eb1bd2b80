//! No error of the workspace prints its cause twice under
//! [`firmware_model::ErrorChain`]: a `#[error("...")]` message does not name
//! the field that `source()` returns (`#[source]`, `#[from]`, or a field
//! called `source`). The check reads the `#[error]` attributes of every Rust
//! file of the workspace; a test that needs such an error says so on the
//! line above it (`// Doubled on purpose`).

use std::path::{Path, PathBuf};

/// Rust files under `dir`, build output and hidden directories left out.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        if p.is_dir() {
            rust_files(&p, out);
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

/// The text from `open` (a `(`, `{` or `[` at `text[at]`) to its match.
fn group(text: &str, at: usize) -> Option<&str> {
    let mut depth = 0usize;
    let mut in_str = false;
    let mut escaped = false;
    for (i, c) in text[at..].char_indices() {
        if in_str {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&text[at..=at + i]);
                }
            }
            _ => {}
        }
    }
    None
}

/// Split the top-level, comma-separated fields of a variant's or struct's
/// body (without its brackets).
fn fields(body: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in body.char_indices() {
        match c {
            '(' | '{' | '[' | '<' => depth += 1,
            ')' | '}' | ']' | '>' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&body[start..]);
    out.into_iter().filter(|f| !f.trim().is_empty()).collect()
}

/// How the message would name the source field: `{0}`/`{0:..}` for a
/// tuple field, `{name}`/`{name:..}` or a trailing argument for a named one.
fn names(attr: &str, field: &str) -> bool {
    let braces = [format!("{{{field}}}"), format!("{{{field}:")];
    if braces.iter().any(|b| attr.contains(b.as_str())) {
        return true;
    }
    // Arguments after the format string: `, source` or `, .0`.
    let Some(end) = attr.rfind('"') else {
        return false;
    };
    attr[end..]
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .any(|w| w == field || w == format!(".{field}"))
}

/// Marks a doubled message that a test of a chain printer needs: the
/// comment on the line above the attribute.
const ON_PURPOSE: &str = "// Doubled on purpose";

fn on_purpose(before: &str) -> bool {
    before
        .trim_end()
        .lines()
        .last()
        .is_some_and(|l| l.trim_start().starts_with(ON_PURPOSE))
}

/// The doubled messages of one file: `path:line: message`.
fn doubled_in(path: &Path, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(off) = text[from..].find("#[error(") {
        let at = from + off;
        from = at + 1;
        let Some(attr) = group(text, at + "#[error".len()) else {
            continue;
        };
        if attr.contains("transparent") && !attr.contains('"') {
            continue;
        }
        // The item the attribute is on: the next `(` or `{` that opens its
        // fields, before any `,` or `;` that would end a unit item.
        let rest_at = at + "#[error".len() + attr.len();
        let rest = &text[rest_at..];
        let mut body_at = None;
        let mut i = 0;
        while i < rest.len() {
            let c = rest.as_bytes()[i];
            match c {
                b'#' => {
                    // Another attribute (`#[derive]`, `#[allow]`): skip it.
                    match rest[i..].find('[').and_then(|b| group(rest, i + b)) {
                        Some(g) => i += rest[i..].find('[').unwrap_or(0) + g.len(),
                        None => break,
                    }
                    continue;
                }
                b'/' if rest[i..].starts_with("//") => {
                    i += rest[i..].find('\n').unwrap_or(rest.len() - i);
                    continue;
                }
                b'(' | b'{' => {
                    body_at = Some(i);
                    break;
                }
                b',' | b';' | b'}' => break,
                _ => {}
            }
            i += 1;
        }
        let Some(b) = body_at else { continue };
        let Some(body) = group(rest, b) else { continue };
        let tuple = body.starts_with('(');
        let inner = &body[1..body.len() - 1];
        for (n, f) in fields(inner).iter().enumerate() {
            let name = if tuple {
                n.to_string()
            } else {
                let mut decl = f
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.starts_with("//"))
                    .collect::<Vec<_>>()
                    .join(" ");
                while let Some(a) = decl.find("#[") {
                    let len = group(&decl, a + 1).map_or(decl.len() - a, |g| g.len() + 1);
                    decl.replace_range(a..a + len, "");
                }
                let Some(colon) = decl.find(':') else {
                    continue;
                };
                decl[..colon].trim().trim_start_matches("pub ").to_string()
            };
            let is_source = f.contains("#[source]") || f.contains("#[from]") || name == "source";
            if is_source && names(attr, &name) && !on_purpose(&text[..at]) {
                let line = text[..at].lines().count() + 1;
                found.push(format!("{}:{line}: {attr}", path.display()));
            }
        }
    }
    found
}

#[test]
fn no_error_message_names_the_cause_it_also_returns() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace");
    let mut files = Vec::new();
    rust_files(root, &mut files);
    assert!(files.len() > 50, "found only {} Rust files", files.len());
    let doubled: Vec<String> = files
        .iter()
        .filter(|p| !p.ends_with(file!()))
        .flat_map(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            doubled_in(p, &text)
        })
        .collect();
    assert!(
        doubled.is_empty(),
        "these errors print their cause in the message and return it from source(), \
         so a chain printer prints it twice; drop one:\n{}",
        doubled.join("\n")
    );
}

#[test]
fn the_check_sees_each_way_of_doubling() {
    let doubled = r#"
        enum E {
            #[error("a: {0}")]
            A(#[from] std::io::Error),
            // Doubled on purpose, but not on the line above.
            #[derive(Debug)]
            #[error("b: {source}")]
            B { path: String, source: std::io::Error },
            #[error("c {}: {:?}", path, source)]
            C { path: String, #[source] source: std::io::Error },
            #[error("d: {cause:?}")]
            D {
                /// Why.
                #[source]
                cause: std::io::Error,
            },
        }
        #[derive(Debug, thiserror::Error)]
        #[error("e: {0}")]
        #[allow(dead_code)]
        pub struct S(#[source] pub std::io::Error);
    "#;
    assert_eq!(doubled_in(Path::new("x.rs"), doubled).len(), 5);
    let single = r#"
        enum E {
            #[error("a")]
            A(#[from] std::io::Error),
            #[error("{0} is not a {1}")]
            B(String, u32),
            #[error("b {path}")]
            C { path: String, source: std::io::Error },
            #[error(transparent)]
            D(#[from] std::fmt::Error),
            #[error("unit {x}")]
            U,
            #[error("{0}: {1}")]
            F(u8, #[source] std::io::Error),
            // Doubled on purpose: a printer's test.
            #[error("g: {0}")]
            G(#[source] std::io::Error),
        }
    "#;
    // F names its source ({1}).
    let found = doubled_in(Path::new("y.rs"), single);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("{0}: {1}"), "{found:?}");
}
