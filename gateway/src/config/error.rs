//! Errors that name the file and the line.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::Spanned;

/// A file the gateway refuses: where, and what is wrong. Never holds a secret: the messages
/// name variables and files, not their contents.
#[derive(Debug)]
pub struct FileError {
    /// The file.
    pub path: PathBuf,
    /// The line the error is about (from 1), when it is about one.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl std::error::Error for FileError {}

impl FileError {
    /// An error about line `line` of the file at `path`.
    pub(crate) fn at_line(path: &Path, line: usize, message: impl Into<String>) -> Self {
        Self {
            path: path.to_owned(),
            line: Some(line),
            message: message.into(),
        }
    }

    pub(crate) fn whole(path: &Path, message: impl Into<String>) -> Self {
        Self {
            path: path.to_owned(),
            line: None,
            message: message.into(),
        }
    }
}

/// A file's text, to turn byte offsets into line numbers.
pub(crate) struct Lines<'a> {
    text: &'a str,
    path: &'a Path,
}

impl<'a> Lines<'a> {
    pub(crate) fn new(text: &'a str, path: &'a Path) -> Self {
        Self { text, path }
    }

    /// The line (from 1) of byte `offset`.
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1
    }

    /// A TOML error: its message, at its line. TOML's own rendering quotes the line, which may
    /// hold a value that should stay private, so only its message is kept.
    pub(crate) fn toml(&self, e: &toml::de::Error) -> FileError {
        let message = hide_strings(e.message().trim_end());
        // A value's own error (`10x` is not a duration) does not say whose: the key its line
        // sets, when the message does not name it.
        let message = match e.span().and_then(|s| self.key_at(s.start)) {
            Some(key) if !message.contains(key.rsplit('.').next().unwrap_or(&key)) => {
                format!("{key}: {message}")
            }
            _ => message,
        };
        FileError {
            path: self.path.to_owned(),
            line: e.span().map(|s: Range<usize>| self.line_of(s.start)),
            message,
        }
    }

    /// The key set on the line of byte `offset` (`key = value`), after its table's name when it
    /// is in a `[table]` (`limits.grace`).
    fn key_at(&self, offset: usize) -> Option<String> {
        let offset = offset.min(self.text.len());
        let start = self.text.get(..offset)?.rfind('\n').map_or(0, |i| i + 1);
        let line = self.text.get(start..)?.lines().next()?;
        let key = line.split_once('=')?.0.trim();
        if key.is_empty()
            || !key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        {
            return None;
        }
        let table = self.text[..start]
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| l.starts_with('['));
        Some(match table {
            Some(t) if !t.starts_with("[[") => {
                format!("{}.{key}", t.trim_matches(['[', ']']).trim())
            }
            _ => key.to_owned(),
        })
    }

    pub(crate) fn at<T>(&self, value: &Spanned<T>, message: impl Into<String>) -> FileError {
        // A value the file left out has the empty span at 0: then the error is the file's.
        let span = value.span();
        let line = (span != (0..0)).then(|| self.line_of(span.start));
        FileError {
            path: self.path.to_owned(),
            line,
            message: message.into(),
        }
    }

    pub(crate) fn line(&self, line: usize, message: impl Into<String>) -> FileError {
        FileError {
            path: self.path.to_owned(),
            line: Some(line),
            message: message.into(),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.path
    }

    pub(crate) fn whole(&self, message: impl Into<String>) -> FileError {
        FileError::whole(self.path, message)
    }

    pub(crate) fn flag(&self, flag: &str, message: impl fmt::Display) -> FileError {
        FileError::whole(self.path, format!("{flag}: {message}"))
    }
}

/// A TOML error's message with the strings it quotes (serde's `invalid type: string "…"`)
/// left out: the value may be a secret given under the wrong key or in the wrong shape (a
/// Redis URL with its password as a string where a list was due). The line still says where.
fn hide_strings(message: &str) -> String {
    const QUOTED: &str = "string \"";
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find(QUOTED) {
        out.push_str(&rest[..i]);
        out.push_str("a string");
        let value = &rest[i + QUOTED.len()..];
        // The value ends at its first quote not escaped (serde quotes it as Rust's Debug does).
        let mut escaped = false;
        let end = value.char_indices().find_map(|(j, c)| {
            let ends = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            ends.then_some(j)
        });
        rest = end.map_or("", |j| &value[j + 1..]);
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::hide_strings;

    #[test]
    fn quoted_strings_are_left_out_of_toml_messages() {
        assert_eq!(
            hide_strings(r#"invalid type: string "redis://:hunter2@h:7000", expected a sequence"#),
            "invalid type: a string, expected a sequence"
        );
        assert_eq!(
            hide_strings(r#"invalid value: string "a \"quoted\" secret", expected x"#),
            "invalid value: a string, expected x"
        );
        assert_eq!(
            hide_strings("unknown field `bogus`"),
            "unknown field `bogus`"
        );
        assert_eq!(hide_strings(r#"string "unterminated"#), "a string");
    }
}
