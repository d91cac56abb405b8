//! The settings table of `docs/configuration.md`, between `<!-- settings-table:start -->` and
//! `<!-- settings-table:end -->`, is the one rendered from the settings' declaration
//! (`src/config/settings.rs`, rendered by `src/config/table.rs`). On a difference the test
//! prints the rendered table to paste; with `TWR_BLESS=1` it writes it into the page instead.

use tower_waiting_room::config::table;

const PAGE: &str = "docs/configuration.md";

/// The page's text before the table (through the start marker's line), the table, and the
/// text after it (from the end marker's line).
fn split(text: &str) -> (&str, &str, &str) {
    let start = text
        .find(table::START)
        .unwrap_or_else(|| panic!("{PAGE}: no {} line", table::START));
    let body = start
        + text[start..]
            .find('\n')
            .map_or(text.len() - start, |i| i + 1);
    let end = text[body..]
        .find(table::END)
        .map(|i| body + i)
        .unwrap_or_else(|| panic!("{PAGE}: no {} line after {}", table::END, table::START));
    (&text[..body], &text[body..end], &text[end..])
}

#[test]
fn configuration_settings_table_is_the_rendered_one() {
    let path = format!("{}/{PAGE}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{PAGE}: {e}"));
    let (before, current, after) = split(&text);
    let rendered = table::markdown();
    if current == rendered {
        return;
    }
    if std::env::var_os("TWR_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, format!("{before}{rendered}{after}"))
            .unwrap_or_else(|e| panic!("{PAGE}: {e}"));
        eprintln!("{PAGE}: the settings table rewritten (TWR_BLESS=1)");
        return;
    }
    let differ: Vec<String> = current
        .lines()
        .zip(rendered.lines())
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| format!("  row {}:\n    page:     {a}\n    rendered: {b}", i + 1))
        .take(5)
        .collect();
    panic!(
        "{PAGE}: the settings table is not the one the settings' declaration renders \
         ({} lines on the page, {} rendered; first differences below). Paste the table below \
         between the markers, or run `TWR_BLESS=1 cargo test --all-features --test docs`.\n\
         {}\n\n{}\n{rendered}{}\n",
        current.lines().count(),
        rendered.lines().count(),
        differ.join("\n"),
        table::START,
        table::END
    );
}
