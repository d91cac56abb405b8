//! The crate's Redis function libraries (the room's, matching's) as their tests read them: the
//! files each is assembled from, the headers that hold each function's `ARGV` to its Rust
//! struct, and the few statements of the Lua that the tests hold to the crate's (a `local`'s
//! names, a table's fields, a definition's calls, a registration's arguments), read from the
//! code without its comments ([`code`]). A header stands above each function's body (the room's
//! name their function `<LIBRARY>_<op>`, and say what it runs: [`runs_block`]):
//!
//! ```text
//! -- <function>: what it does
//! -- Runs: <file>.lua F.<helper>, ...; <file>.lua F.<helper>, ...
//! --   (a continuation line, indented)
//! -- KEYS: ...
//! -- ARGV:
//! --   1 <name>   what it is
//! --              (a continuation line: no number)
//! --   2 <name>   ...
//! -- Reply: ...
//! ```

/// The `ARGV` names of the function `function` as its header in `script` lists them: the lines
/// `--   <n> <name> ...` after `-- ARGV`, numbered from 1 with no gap.
pub fn argv_names(script: &str, function: &str) -> Vec<String> {
    let start = script
        .find(&format!("\n-- {function}: "))
        .unwrap_or_else(|| panic!("no header for {function}"));
    let mut lines = script[start + 1..].lines();
    lines
        .by_ref()
        .find(|l| l.starts_with("-- ARGV"))
        .unwrap_or_else(|| panic!("{function}'s header lists no ARGV"));
    let mut names = Vec::new();
    for line in lines {
        if line.starts_with("-- Reply") || !line.starts_with("--") {
            break;
        }
        let mut words = line.trim_start_matches('-').split_whitespace();
        let (Some(n), Some(field)) = (words.next(), words.next()) else {
            continue;
        };
        // A continuation line (its first word no number) belongs to the field above.
        let Ok(n) = n.parse::<usize>() else {
            continue;
        };
        assert_eq!(n, names.len() + 1, "{function}'s ARGV numbering: {line}");
        names.push(field.to_owned());
    }
    names
}

/// Asserts that each `.lua` file under `dir` (from the crate's root) is in `script` once: a file
/// left out fails at load (a function it defines is missing), but one included twice only
/// redefines its functions, which no other test would notice. Answers how many there are.
pub fn each_file_once(script: &str, dir: &str) -> usize {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "lua") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(
                script.matches(text.as_str()).count(),
                1,
                "{}",
                path.display()
            );
            files += 1;
        }
    }
    files
}

/// The code of `script` without its comments (`--` to the end of the line; no string of the
/// crate's scripts holds `--`), its whitespace collapsed to single spaces: the text the tests
/// read the Lua's own statements from, however a statement is broken across lines.
pub fn code(script: &str) -> String {
    script
        .lines()
        .map(|l| l.split_once("--").map_or(l, |(code, _)| code))
        .flat_map(str::split_whitespace)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The definition in `script` that starts with the line `head` (`function F.main()`, or its
/// start, `function F.setup(`), up to the `end` that closes it (the first line that is `end`
/// alone: the scripts indent every inner one), as [`code`].
pub fn definition(script: &str, head: &str) -> String {
    let start = script
        .find(&format!("\n{head}"))
        .unwrap_or_else(|| panic!("no definition {head}"));
    let body = &script[start + 1..];
    let end = body
        .find("\nend\n")
        .unwrap_or_else(|| panic!("{head} has no end"));
    code(&body[..end])
}

/// The names the statement `local <names> = <value>` declares, in their order: the one
/// statement of `script` whose value is `value` (as [`code`] spells it).
pub fn locals_of(script: &str, value: &str) -> Vec<String> {
    let code = code(script);
    let at = format!(" = {value}");
    assert_eq!(
        code.matches(&at).count(),
        1,
        "one statement `local ... = {value}`"
    );
    let before = &code[..code.find(&at).unwrap()];
    let names = &before[before.rfind("local ").expect("a local statement") + "local ".len()..];
    names.split(", ").map(str::to_owned).collect()
}

/// The fields of the table constructor `local <name> = {...}` of `script`, as written (as
/// [`code`]), in their order: `key = value`, or the value alone.
pub fn table_fields(script: &str, name: &str) -> Vec<String> {
    let code = code(script);
    let head = format!("local {name} = {{");
    assert_eq!(code.matches(&head).count(), 1, "one table {name}");
    let body = &code[code.find(&head).unwrap() + head.len()..];
    let (mut fields, mut field, mut depth) = (Vec::new(), String::new(), 0);
    for c in body.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                fields.push(std::mem::take(&mut field).trim().to_owned());
                continue;
            }
            _ => {}
        }
        field.push(c);
    }
    if !field.trim().is_empty() {
        fields.push(field.trim().to_owned());
    }
    fields
}

/// The `-- Runs` block of the comment that starts at `from` in `text` (a function's header, or a
/// helper's comment): its first line and the lines indented under it (`--   ...`), as one line.
/// `None` if the comment ends first.
pub fn runs_block(text: &str, from: usize) -> Option<String> {
    let mut lines = text[from..]
        .lines()
        .take_while(|l| l.starts_with("--"))
        .skip_while(|l| !l.starts_with("-- Runs"));
    let mut block = lines.next()?.to_owned();
    for l in lines.take_while(|l| l.starts_with("--   ")) {
        block.push(' ');
        block.push_str(l.trim_start_matches('-').trim());
    }
    Some(block)
}

/// The helpers a `-- Runs` block names (`F.<name>`), each with the file it names it under: the
/// nearest `<file>.lua` before it in the block, else `own` (the file of the header).
pub fn runs_helpers(block: &str, own: &str) -> Vec<(String, String)> {
    let mut file = own.to_owned();
    let mut helpers = Vec::new();
    for word in block.split_whitespace() {
        let word = word
            .trim_start_matches('(')
            .trim_end_matches(|c| ",;:.)".contains(c));
        let word = word.strip_suffix("'s").unwrap_or(word);
        if word.ends_with(".lua") {
            file = word.to_owned();
        } else if word.starts_with("F.") {
            helpers.push((file.clone(), word.to_owned()));
        }
    }
    helpers
}

/// Every function a library's `register.lua` (its text `register`) registers, by whichever of
/// its `register...` helpers: the lines `register...('<op>', <arguments>)`, each as the
/// function's name there (`<op>`, which the helper puts after the library's name), the helper,
/// and the arguments after the name (quotes dropped).
pub fn registrations(register: &str) -> Vec<(&str, &str, Vec<&str>)> {
    register
        .lines()
        .filter(|l| l.starts_with("register"))
        .map(|l| {
            let (helper, rest) = l.split_once("('").expect("register...('<op>', ...)");
            let rest = rest.strip_suffix(')').expect("on one line");
            let mut parts = rest.split(", ").map(|p| p.trim_matches('\''));
            let op = parts.next().unwrap();
            (op, helper, parts.collect())
        })
        .collect()
}

/// The helpers (`F.<name>`) that `code` (as [`code`] makes it) calls itself.
pub fn helpers_called(code: &str) -> std::collections::BTreeSet<String> {
    code.match_indices("F.")
        .filter(|&(at, _)| !code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
        .map(|(at, _)| {
            let name: String = code[at + 2..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            format!("F.{name}")
        })
        .collect()
}
