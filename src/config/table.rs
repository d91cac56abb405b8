//! The settings table of `docs/configuration.md`, rendered from the settings' one declaration
//! (`settings!` in `src/config/settings.rs`): for each setting its key (the builder method),
//! its environment variable, its default as a file writes it (from `Settings::default()`), how
//! a file writes a value (from the field's type and reader) and its meaning (the first sentence
//! of the builder setter's doc). `tests/docs/settings_table.rs` compares the page with
//! [`markdown`]; hidden from the docs: for that test only.

use std::time::{Duration, SystemTime};

use super::settings::{Declared, Settings, DECLARED};
use super::{FailPolicy, SameSite};
use crate::defences::RateLimit;

/// The comment line before the table in `docs/configuration.md`.
pub const START: &str = "<!-- settings-table:start -->";
/// The comment line after the table in `docs/configuration.md`.
pub const END: &str = "<!-- settings-table:end -->";

/// One row of the settings table.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Row {
    /// The key of a file, and the builder method of the same name (`active_ttl`).
    pub key: &'static str,
    /// The environment variable `RoomFile::from_env` reads (`{PREFIX}_ACTIVE_TTL`).
    pub variable: String,
    /// The default: as a file writes it (`"5m"`, `100000`, `true`), or what an unset default
    /// means (required, none, the value it resolves to).
    pub default: String,
    /// Whether `default` is words (an unset default's) rather than the declared value.
    pub in_words: bool,
    /// How a file writes a value.
    pub file: String,
    /// The first sentence of the builder setter's doc, rustdoc links turned into text.
    pub meaning: String,
}

/// Every declared setting, in the declaration's order.
///
/// # Panics
///
/// When the declaration cannot be shown: a field whose type and reader this module does not
/// describe, an unset default without the words for it, or the words with a default that is
/// set. The docs tests call it, so such a declaration fails them.
pub fn rows() -> Vec<Row> {
    let defaults = Settings::default();
    DECLARED.iter().map(|d| row(d, &defaults)).collect()
}

fn row(d: &Declared, defaults: &Settings) -> Row {
    let in_words = d.unset.is_some();
    let default = match ((d.written)(defaults), d.unset) {
        (Some(value), None) => format!("`{value}`"),
        (None, Some(words)) => words.to_owned(),
        (Some(value), Some(words)) => panic!(
            "settings!: `{}` has a default ({value}) and `unset {words:?}`: drop the `unset`",
            d.name
        ),
        (None, None) => panic!(
            "settings!: `{}` has an unset default: say what it means with `unset \"...\"`",
            d.name
        ),
    };
    Row {
        key: d.name,
        variable: format!("{{PREFIX}}_{}", d.name.to_ascii_uppercase()),
        default,
        in_words,
        file: file_syntax(d).to_owned(),
        meaning: summary(d.doc),
    }
}

/// The table, with its header, one line a row, each line ending in `\n`.
pub fn markdown() -> String {
    let mut out = String::from(
        "| key | environment variable | default | in a file | meaning |\n|---|---|---|---|---|\n",
    );
    for r in rows() {
        let cells = [
            format!("`{}`", r.key),
            format!("`{}`", r.variable),
            r.default,
            r.file,
            r.meaning,
        ];
        out.push('|');
        for cell in cells {
            out.push(' ');
            out.push_str(&cell.replace('|', "\\|"));
            out.push_str(" |");
        }
        out.push('\n');
    }
    out
}

/// How a file (or a variable) writes a value of the setting: by the reader its `serde`
/// attribute names, or for a plain field by its type.
fn file_syntax(d: &Declared) -> &'static str {
    let reader = d
        .serde
        .split('"')
        .nth(1)
        .map(|path| path.rsplit("::").next().unwrap_or(path));
    let ty: String = d.ty.chars().filter(|c| !c.is_whitespace()).collect();
    match (reader, ty.as_str()) {
        (Some("duration" | "some_duration"), _) => "a duration",
        (Some("rate_limit"), _) => "`\"<max>/<duration>\"` (`\"60/1m\"`, `\"5/s\"`), or `\"off\"`",
        (Some("fail_policy"), _) => "`\"open\"`, `\"closed\"`, `\"drain\"` or `\"drain:<budget>\"`",
        (Some("same_site"), _) => "`\"lax\"`, `\"strict\"` or `\"none\"`",
        (Some("networks"), _) => {
            "addresses and CIDR ranges, one string separated by commas (`\"192.0.2.0/24, 2001:db8::/32\"`)"
        }
        (Some("unix_time"), _) => "Unix seconds, a whole number",
        (Some("auto_capacity"), _) => {
            "`\"<min>-<max>, p95 <duration>\"`, then optionally `\", errors <n>%\"`, `\", window <duration>\"` and `\", rate follows\"`; or `\"off\"`"
        }
        (None, "u8" | "u32" | "u64" | "usize" | "Option<u8>" | "Option<u32>" | "Option<u64>") => {
            "a whole number"
        }
        (None, "bool") => "`true` or `false`",
        (None, "String" | "Option<String>") => "a string",
        (reader, ty) => panic!(
            "settings!: `{}`: no description of how a file writes a {ty} read by {reader:?}: \
             add one to src/config/table.rs",
            d.name
        ),
    }
}

/// The first sentence of the first paragraph of a doc, on one line, with rustdoc links turned
/// into their text.
fn summary(doc: &str) -> String {
    let paragraph = doc
        .lines()
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let text = unlink(&paragraph);
    // The first `.` outside code and brackets, followed by a space or the end.
    let b = text.as_bytes();
    let (mut code, mut depth) = (false, 0i32);
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'`' => code = !code,
            b'(' | b'[' if !code => depth += 1,
            b')' | b']' if !code => depth -= 1,
            b'.' if !code && depth == 0 && b.get(i + 1).is_none_or(|n| *n == b' ') => {
                return text[..=i].to_owned();
            }
            _ => {}
        }
    }
    text
}

/// `[text](target)` and `[text][ref]` as `text`, `[`path`]` as `` `path` ``; code spans are
/// left as they are.
fn unlink(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(['`', '[']) {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        if rest.starts_with('`') {
            // A code span, copied whole.
            let end = rest[1..].find('`').map_or(rest.len(), |j| j + 2);
            out.push_str(&rest[..end]);
            rest = &rest[end..];
            continue;
        }
        // A link: its text (which may hold code spans), then a target to drop.
        let Some(close) = closing_bracket(rest) else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[1..close]);
        rest = &rest[close + 1..];
        for (open, shut) in [('(', ')'), ('[', ']')] {
            if rest.starts_with(open) {
                if let Some(j) = rest.find(shut) {
                    rest = &rest[j + 1..];
                }
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Where the `[` that starts `text` closes, code spans skipped.
fn closing_bracket(text: &str) -> Option<usize> {
    let mut code = false;
    for (i, c) in text.char_indices().skip(1) {
        match c {
            '`' => code = !code,
            ']' if !code => return Some(i),
            _ => {}
        }
    }
    None
}

/// A setting's value as a file writes it; `None` when unset.
pub(crate) trait Written {
    fn written(&self) -> Option<String>;
}

macro_rules! written_as_display {
    ($($t:ty),*) => {$(
        impl Written for $t {
            fn written(&self) -> Option<String> {
                Some(self.to_string())
            }
        }
    )*};
}
written_as_display!(u8, u32, u64, usize, bool);

impl Written for String {
    fn written(&self) -> Option<String> {
        Some(format!("{self:?}"))
    }
}

impl Written for Duration {
    fn written(&self) -> Option<String> {
        Some(format!("\"{}\"", readable_duration(*self)))
    }
}

impl Written for FailPolicy {
    fn written(&self) -> Option<String> {
        Some(match self {
            FailPolicy::Open => "\"open\"".to_owned(),
            FailPolicy::Closed => "\"closed\"".to_owned(),
            FailPolicy::Drain { budget } => format!("\"drain:{budget}\""),
        })
    }
}

impl Written for SameSite {
    fn written(&self) -> Option<String> {
        Some(format!("\"{}\"", self.as_str().to_ascii_lowercase()))
    }
}

/// A rate limit is never unset: `None` is written `"off"`.
impl Written for Option<RateLimit> {
    fn written(&self) -> Option<String> {
        Some(match self {
            Some(limit) => format!("\"{}/{}\"", limit.max(), readable_duration(limit.per())),
            None => "\"off\"".to_owned(),
        })
    }
}

/// Auto capacity's terms as a file writes them; `None` is `"off"`.
impl Written for Option<crate::auto::AutoCapacity> {
    fn written(&self) -> Option<String> {
        Some(match self {
            Some(t) => format!(
                "\"{}-{}, p95 {}, errors {}%, window {}\"",
                t.get_min(),
                t.get_max(),
                readable_duration(t.get_target_p95()),
                t.get_error_budget() * 100.0,
                readable_duration(t.get_window())
            ),
            None => "\"off\"".to_owned(),
        })
    }
}

impl Written for SystemTime {
    fn written(&self) -> Option<String> {
        let secs = self
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Some(secs.to_string())
    }
}

/// A list of addresses: one string, separated by commas; unset when empty.
impl Written for Vec<String> {
    fn written(&self) -> Option<String> {
        (!self.is_empty()).then(|| format!("{:?}", self.join(", ")))
    }
}

macro_rules! written_option {
    ($($t:ty),*) => {$(
        impl Written for Option<$t> {
            fn written(&self) -> Option<String> {
                self.as_ref().and_then(Written::written)
            }
        }
    )*};
}
written_option!(u8, u32, String, Duration, SystemTime);

/// `5m`, `30s`, `1m30s`, `24h`, `250ms`: the largest units first, as a file writes it.
fn readable_duration(d: Duration) -> String {
    const UNITS: [(&str, u128); 5] = [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
        ("ms", 1),
    ];
    let mut ms = d.as_millis();
    if ms == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    for (unit, size) in UNITS {
        if ms >= size {
            out.push_str(&format!("{}{unit}", ms / size));
            ms %= size;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RoomFile;

    #[test]
    fn durations_are_written_as_a_file_reads_them() {
        for (secs, text) in [
            (300, "5m"),
            (30, "30s"),
            (90, "1m30s"),
            (86_400, "1d"),
            (10, "10s"),
        ] {
            assert_eq!(readable_duration(Duration::from_secs(secs)), text);
        }
        assert_eq!(readable_duration(Duration::from_millis(1_250)), "1s250ms");
    }

    #[test]
    fn summaries_are_first_sentences_without_links() {
        assert_eq!(
            summary(" What new visitors get. Default [`FailPolicy::Open`].\n"),
            "What new visitors get."
        );
        assert_eq!(
            summary(" See [`risk`](crate::defences::risk) (or [the docs][d]) for `a.b`.\n More.\n"),
            "See `risk` (or the docs) for `a.b`."
        );
        assert_eq!(summary(" A (`x`. y) b.\n\n Next.\n"), "A (`x`. y) b.");
    }

    /// Every default the table writes reads back, from a file, as the same default: the
    /// table's "default" column is valid file syntax for its key.
    #[test]
    fn written_defaults_read_back_from_a_file() {
        let defaults = Settings::default();
        let mut read = 0;
        for d in DECLARED {
            let Some(value) = (d.written)(&defaults) else {
                continue;
            };
            let text = format!("room = \"x\"\n{} = {value}\n", d.name);
            let file: RoomFile = toml::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: the table's {value} does not read: {e}", d.name));
            assert_eq!(
                (d.written)(&file.settings).as_deref(),
                Some(value.as_str()),
                "{}: {value} reads back as another value",
                d.name
            );
            read += 1;
        }
        assert!(read >= 15, "only {read} defaults are written");
    }

    #[test]
    fn every_setting_has_a_row_that_renders() {
        let rows = rows();
        assert_eq!(rows.len(), DECLARED.len());
        for r in &rows {
            assert!(
                r.meaning.ends_with('.') && r.meaning.len() > 10,
                "{}: {:?}",
                r.key,
                r.meaning
            );
            assert!(
                !r.meaning.contains("]("),
                "{}: a link is left: {}",
                r.key,
                r.meaning
            );
        }
        assert!(markdown().lines().count() == rows.len() + 2);
    }
}
