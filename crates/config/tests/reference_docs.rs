//! The configuration reference covers the parser: every field name the configuration parser
//! accepts, and every command-line flag, appears in `docs/configuration.md`.
//!
//! The accepted names come from the parser's own code, not from a list kept beside it. The
//! walker (`src/walk.rs`) checks a mapping's keys when it is opened, against the lists given to
//! `obj(allowed)`, `obj_with(allowed, unsupported)` and `typed(type_url, allowed, unsupported)`;
//! the provider decoders in `crates/keyprovider` check theirs with `check_fields(cfg, known)` and
//! `check_known(known)`. This test reads those calls from the source (test modules left out) and
//! resolves each list argument: a literal array, or a `const`/`let` of the same file (the nearest
//! one above the call, followed through the constants it names and the `extend`s it gets). An
//! argument it cannot resolve fails the test, so a new way of passing a list cannot slip past
//! it. The flags come from `crates/quickshake/src/cli.rs`'s clap attributes the same way.
//!
//! A name counts as documented when it appears in a code span (`` `...` ``) or a fenced example
//! of the page, as a whole word (`address.socket_address` documents `socket_address`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Rust source with comments blanked out (strings and char literals kept, byte offsets kept).
fn strip_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        out[i] = b' ';
                        out[i + 1] = b' ';
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        out[i] = b' ';
                        out[i + 1] = b' ';
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        if b[i] != b'\n' {
                            out[i] = b' ';
                        }
                        i += 1;
                    }
                }
            }
            b'"' => i = skip_string(b, i),
            b'r' if is_raw_string_start(b, i) => i = skip_raw_string(b, i),
            b'\'' => i = skip_char(b, i),
            _ => i += 1,
        }
    }
    String::from_utf8(out).expect("comments blanked on ASCII boundaries")
}

fn is_raw_string_start(b: &[u8], i: usize) -> bool {
    let ident_before = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
    if ident_before {
        return false;
    }
    let mut j = i + 1;
    while b.get(j) == Some(&b'#') {
        j += 1;
    }
    b.get(j) == Some(&b'"')
}

/// The index just past the string literal opening at `i`.
fn skip_string(b: &[u8], mut i: usize) -> usize {
    i += 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

fn skip_raw_string(b: &[u8], mut i: usize) -> usize {
    i += 1;
    let mut hashes = 0;
    while b[i] == b'#' {
        hashes += 1;
        i += 1;
    }
    i += 1;
    while i < b.len() {
        if b[i] == b'"' && b[i + 1..].iter().take(hashes).all(|&c| c == b'#') {
            return i + 1 + hashes;
        }
        i += 1;
    }
    i
}

/// A char literal (`'x'`, `'\n'`) is skipped whole; a lifetime (`'a`) is one byte.
fn skip_char(b: &[u8], i: usize) -> usize {
    if b.get(i + 1) == Some(&b'\\') {
        let mut j = i + 2;
        while j < b.len() && b[j] != b'\'' {
            j += 1;
        }
        return j + 1;
    }
    let len = std::str::from_utf8(&b[i + 1..])
        .ok()
        .and_then(|s| s.chars().next())
        .map_or(1, char::len_utf8);
    if b.get(i + 1 + len) == Some(&b'\'') {
        i + 2 + len
    } else {
        i + 1
    }
}

/// The index of the bracket closing the one at `open`.
fn matching(b: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            b'"' => {
                i = skip_string(b, i);
                continue;
            }
            b'\'' => {
                i = skip_char(b, i);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    panic!("unbalanced bracket at byte {open}");
}

/// The source without its `#[cfg(test)]` items (test modules call the walker with made-up lists).
fn without_tests(src: &str) -> String {
    let mut s = src.to_owned();
    while let Some(at) = s.find("#[cfg(test)]") {
        let b = s.as_bytes();
        let Some(rel) = s[at..].find(['{', ';']) else {
            break;
        };
        let end = if b[at + rel] == b'{' {
            matching(b, at + rel) + 1
        } else {
            at + rel + 1
        };
        s.replace_range(at..end, "");
    }
    s
}

/// Top-level comma-separated pieces of `args`.
fn split_args(args: &str) -> Vec<String> {
    let b = args.as_bytes();
    let mut out = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < b.len() {
        match b[i] {
            b'(' | b'[' | b'{' => {
                i = matching(b, i) + 1;
                continue;
            }
            b'"' => {
                i = skip_string(b, i);
                continue;
            }
            b',' => {
                out.push(args[start..i].trim().to_owned());
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    let last = args[start..].trim();
    if !last.is_empty() {
        out.push(last.to_owned());
    }
    out
}

/// The string literals in `expr`.
fn string_literals(expr: &str) -> Vec<String> {
    let b = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            let end = skip_string(b, i);
            out.push(expr[i + 1..end - 1].to_owned());
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// Identifiers in `expr` outside string literals.
fn identifiers(expr: &str) -> Vec<String> {
    let mut blanked = expr.to_owned();
    for lit in string_literals(expr) {
        blanked = blanked.replacen(&format!("\"{lit}\""), "\"\"", 1);
    }
    blanked
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
        .map(str::to_owned)
        .collect()
}

struct SourceFile {
    path: PathBuf,
    code: String,
}

/// Where `name` is defined by `const` or `let` in `file`, nearest above `before` (else anywhere
/// in the file): the defining expression.
fn definition(file: &SourceFile, name: &str, before: usize) -> Option<String> {
    let code = &file.code;
    let b = code.as_bytes();
    let mut found: Vec<(usize, String)> = Vec::new();
    for kw in ["const ", "let ", "let mut ", "static "] {
        let pat = format!("{kw}{name}");
        let mut from = 0;
        while let Some(rel) = code[from..].find(&pat) {
            let at = from + rel;
            from = at + pat.len();
            let next = b.get(at + pat.len()).copied().unwrap_or(b' ');
            let word_start = at == 0 || !(b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_');
            if !word_start || next.is_ascii_alphanumeric() || next == b'_' {
                continue;
            }
            let Some(eq) = code[at..].find('=') else {
                continue;
            };
            // The expression runs to the `;` at bracket depth 0.
            let mut i = at + eq + 1;
            while i < b.len() && b[i] != b';' {
                match b[i] {
                    b'(' | b'[' | b'{' => i = matching(b, i) + 1,
                    b'"' => i = skip_string(b, i),
                    _ => i += 1,
                }
            }
            found.push((at, code[at + eq + 1..i].to_owned()));
        }
    }
    found.sort();
    let above = found.iter().rev().find(|(at, _)| *at < before);
    above.or(found.first()).map(|(_, e)| e.clone())
}

/// The field names a list argument stands for, following constants and `extend`s; an error
/// names what could not be resolved.
fn resolve(
    files: &[SourceFile],
    file: usize,
    expr: &str,
    at: usize,
    seen: &mut BTreeSet<String>,
) -> Result<Vec<String>, String> {
    let mut names = string_literals(expr);
    for id in identifiers(expr) {
        // Method names and type words in a defining expression (`HEADER_KINDS.to_vec()`,
        // `&[&str]`), not names of lists.
        if matches!(
            id.as_str(),
            "to_vec" | "str" | "vec" | "Vec" | "iter" | "copied" | "collect" | "chain" | "into"
        ) {
            continue;
        }
        if !seen.insert(format!("{file}:{id}")) {
            continue;
        }
        let local = definition(&files[file], &id, at);
        let (def_file, def) = match local {
            Some(d) => (file, d),
            None => files
                .iter()
                .enumerate()
                .find_map(|(i, f)| definition(f, &id, usize::MAX).map(|d| (i, d)))
                .ok_or_else(|| {
                    format!(
                        "{}: cannot resolve `{id}` in `{}`",
                        files[file].path.display(),
                        expr.trim()
                    )
                })?,
        };
        names.extend(resolve(files, def_file, &def, at, seen)?);
        // `id.extend([...])` adds to a list built at run time.
        let code = &files[def_file].code;
        let pat = format!("{id}.extend(");
        let mut from = 0;
        while let Some(rel) = code[from..].find(&pat) {
            let open = from + rel + pat.len() - 1;
            let close = matching(code.as_bytes(), open);
            names.extend(resolve(files, def_file, &code[open + 1..close], at, seen)?);
            from = close;
        }
    }
    Ok(names)
}

/// `(method, which arguments list accepted fields)` of the key-checking calls.
const CHECKS: [(&str, &[usize]); 5] = [
    (".obj(", &[0]),
    (".obj_with(", &[0]),
    (".typed(", &[1]),
    ("check_fields(", &[1]),
    (".check_known(", &[0]),
];

/// Every field name accepted by a key-checking call in the `.rs` files under `dirs`, with the
/// files and lines that accept it; also how many calls were read.
fn accepted_fields(dirs: &[&str], skip: &[&str]) -> (BTreeMap<String, BTreeSet<String>>, usize) {
    let root = repo_root();
    let mut paths = Vec::new();
    for d in dirs {
        rust_files(&root.join(d), &mut paths);
    }
    let files: Vec<SourceFile> = paths
        .into_iter()
        .filter(|p| !skip.iter().any(|s| p.ends_with(s)))
        .map(|p| {
            let src = fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            SourceFile {
                code: without_tests(&strip_comments(&src)),
                path: p,
            }
        })
        .collect();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut calls = 0;
    let mut errors = Vec::new();
    for (fi, f) in files.iter().enumerate() {
        for (method, list_args) in CHECKS {
            let mut from = 0;
            while let Some(rel) = f.code[from..].find(method) {
                let at = from + rel;
                from = at + method.len();
                if method == "check_fields(" && f.code[..at].ends_with("fn ") {
                    continue; // its definition
                }
                let open = at + method.len() - 1;
                let close = matching(f.code.as_bytes(), open);
                let args = split_args(&f.code[open + 1..close]);
                calls += 1;
                let line = f.code[..at].matches('\n').count() + 1;
                let place = format!(
                    "{}:{line}",
                    f.path
                        .strip_prefix(repo_root())
                        .unwrap_or(&f.path)
                        .display()
                );
                for &a in list_args {
                    let Some(arg) = args.get(a) else {
                        errors.push(format!("{place}: {method} with {} arguments", args.len()));
                        continue;
                    };
                    let empty = arg.trim_start_matches('&').trim() == "[]";
                    match resolve(&files, fi, arg, at, &mut BTreeSet::new()) {
                        Ok(names) if names.is_empty() && !empty => {
                            errors.push(format!("{place}: `{arg}` resolved to no field"))
                        }
                        Ok(names) => {
                            for n in names {
                                out.entry(n).or_default().insert(place.clone());
                            }
                        }
                        Err(e) => errors.push(format!("{place}: {e}")),
                    }
                }
            }
        }
    }
    assert!(
        errors.is_empty(),
        "unreadable field lists:\n{}",
        errors.join("\n")
    );
    (out, calls)
}

/// Every word in the page's code spans and fenced blocks (split on anything but identifier
/// characters, `@`, `-`; dotted paths also give their parts).
fn documented_words(page: &str) -> BTreeSet<String> {
    let mut code = String::new();
    let mut fenced = false;
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            code.push_str(line);
            code.push('\n');
            continue;
        }
        // Inline code spans: text between backtick runs of the same length (here: single).
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 1 {
                code.push_str(part);
                code.push('\n');
            }
        }
    }
    let mut words = BTreeSet::new();
    for w in code.split(|c: char| !(c.is_ascii_alphanumeric() || "_@.-".contains(c))) {
        let w = w.trim_matches(|c| c == '.' || c == '-');
        if w.is_empty() {
            continue;
        }
        words.insert(w.to_owned());
        for part in w.split('.') {
            words.insert(part.to_owned());
        }
    }
    words
}

fn page() -> String {
    let p = repo_root().join("docs/configuration.md");
    fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Fails naming every field of `fields` that the page does not mention, and where it is accepted.
fn assert_documented(fields: &BTreeMap<String, BTreeSet<String>>, what: &str) {
    let words = documented_words(&page());
    let missing: Vec<String> = fields
        .iter()
        .filter(|(name, _)| !words.contains(name.as_str()))
        .map(|(name, at)| {
            let at: Vec<&str> = at.iter().map(String::as_str).collect();
            format!("`{name}` (accepted at {})", at.join(", "))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/configuration.md does not mention {} {what}(s):\n{}",
        missing.len(),
        missing.join("\n")
    );
}

#[test]
fn every_field_the_parser_accepts_is_in_the_configuration_reference() {
    let (fields, calls) = accepted_fields(&["crates/config/src"], &["src/walk.rs"]);
    // The walker is opened in well over a hundred places; far fewer means the reading broke.
    assert!(calls > 100, "only {calls} key-checking calls found");
    assert!(
        fields.len() > 300,
        "only {} field names found",
        fields.len()
    );
    assert_documented(&fields, "accepted field");
}

#[test]
fn every_private_key_provider_field_is_in_the_configuration_reference() {
    let (fields, calls) = accepted_fields(&["crates/keyprovider/src"], &[]);
    assert!(
        calls >= 3,
        "only {calls} provider field checks found in crates/keyprovider/src"
    );
    assert_documented(&fields, "provider field");
}

/// The long flags (`--name`) and short ones (`-c`) declared in `cli.rs`'s `#[arg(...)]`s.
fn cli_flags() -> BTreeSet<String> {
    let p = repo_root().join("crates/quickshake/src/cli.rs");
    let src = fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let code = without_tests(&strip_comments(&src));
    let b = code.as_bytes();
    let mut flags = BTreeSet::new();
    let mut from = 0;
    while let Some(rel) = code[from..].find("#[arg(") {
        let open = from + rel + "#[arg".len();
        let close = matching(b, open);
        from = close;
        let args = split_args(&code[open + 1..close]);
        for a in &args {
            let (key, value) = match a.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (a.trim(), None),
            };
            match (key, value) {
                ("long", Some(v)) => {
                    flags.insert(format!("--{}", v.trim_matches('"')));
                }
                ("long", None) => {
                    // The field the attribute sits on: `pub name: T` or `name: T`.
                    let rest = &code[close + 1..];
                    let field = rest
                        .lines()
                        .map(str::trim)
                        .find(|l| !l.is_empty() && !l.starts_with("#[") && *l != "]")
                        .and_then(|l| l.trim_start_matches("pub ").split(':').next())
                        .map(|f| f.trim().replace('_', "-"))
                        .expect("a field after #[arg(long)]");
                    flags.insert(format!("--{field}"));
                }
                ("short", Some(v)) => {
                    flags.insert(format!("-{}", v.trim_matches('\'')));
                }
                _ => {}
            }
        }
    }
    flags
}

#[test]
fn every_command_line_flag_is_in_the_configuration_reference() {
    let flags = cli_flags();
    assert!(
        flags.len() > 15,
        "only {} flags found: {flags:?}",
        flags.len()
    );
    let page = page();
    let missing: Vec<&String> = flags
        .iter()
        .filter(|f| {
            // As a word: `--log-format` must not count because `--log-format-x` is there.
            !page.match_indices(f.as_str()).any(|(i, _)| {
                let after = page[i + f.len()..].chars().next().unwrap_or(' ');
                let before = page[..i].chars().next_back().unwrap_or(' ');
                let in_word = |c: char| c.is_ascii_alphanumeric() || c == '-';
                !in_word(after) && !in_word(before)
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/configuration.md does not mention the flag(s) {missing:?}"
    );
}

/// The README's one complete config (the first fenced `yaml` block under "One complete config")
/// is a bootstrap the parser takes. Its files and the provider's `typed_config` are read later
/// (by the TLS and key-provider crates): `quickshake --mode validate` checks those.
#[test]
fn the_readme_example_config_parses() {
    let p = repo_root().join("README.md");
    let readme = fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let section = readme
        .split("\n## One complete config")
        .nth(1)
        .expect("README.md has a \"## One complete config\" section");
    let yaml = section
        .split("```yaml\n")
        .nth(1)
        .and_then(|s| s.split("\n```").next())
        .expect("a ```yaml block in that section");
    let bootstrap = quickshake_config::parse_str(yaml)
        .unwrap_or_else(|e| panic!("README.md's example config does not parse: {e}"));
    assert_eq!(bootstrap.listeners.len(), 1, "one listener");
}
