//! The crate's Redis function libraries (the room's, matching's) as their tests read them: the
//! files each is assembled from, and the headers that hold each function's `ARGV` to its Rust
//! struct. A header stands above each function's body:
//!
//! ```text
//! -- <function>: what it does
//! -- KEYS: ...
//! -- ARGV:
//! --   1 <name>   what it is
//! --              (a continuation line: no number)
//! --   2 <name>   ...
//! -- Reply: ...
//! ```

/// The `ARGV` names of the function `function` as its header in `script` lists them: the lines
/// `--   <n> <name> ...` after `-- ARGV`, numbered from 1 with no gap.
pub(crate) fn argv_names(script: &str, function: &str) -> Vec<String> {
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
pub(crate) fn each_file_once(script: &str, dir: &str) -> usize {
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
