//! The hand-written text of `docs/configuration.md` besides its defaults: the sentences about
//! cookies and the drain budget, and a row for every key of a settings file.

use super::{app, first_visit, layer, number, read, setting, spans, table, CONFIGURATION};

use std::collections::BTreeSet;

use tower_waiting_room::config::RoomFile;
use tower_waiting_room::FailPolicy;

/// "Cookies are always `HttpOnly`. With the defaults they are `wr_{room}_q` ..., `Path=/`,
/// `Secure`, `SameSite=Lax`, host-only": against a real `Set-Cookie`.
#[tokio::test]
async fn configuration_cookie_sentence_is_a_real_cookie() {
    let text = read(CONFIGURATION);
    let sentence: String = text
        .split("\n\n")
        .find(|p| p.starts_with("Cookies are always `HttpOnly`."))
        .unwrap_or_else(|| {
            panic!("{CONFIGURATION}: no paragraph \"Cookies are always `HttpOnly`.\"")
        })
        .to_owned();
    let l = layer();
    let names = l.config().cookies().clone();
    let (set, _) = first_visit(&app(l)).await;
    let attributes: Vec<&str> = set.split(';').skip(1).map(str::trim).collect();
    for span in spans(&sentence) {
        if span.contains("{room}") {
            let name = span.replace("{room}", "x");
            assert!(
                name == names.queue_name() || name == names.admission_name(),
                "{CONFIGURATION}: cookie {name}: the room's are {} and {}",
                names.queue_name(),
                names.admission_name()
            );
        } else {
            assert!(
                attributes.contains(&span.as_str()),
                "{CONFIGURATION}: `{span}` is not an attribute of the queue cookie: {set}"
            );
        }
    }
    assert!(
        sentence.contains("host-only") && !set.contains("Domain="),
        "{CONFIGURATION}: host-only cookies: {set}"
    );
}

/// "`"drain"` alone has a budget of N".
#[test]
fn configuration_drain_budget_is_the_rooms() {
    let text = read(CONFIGURATION).replace('\n', " ");
    let at = text
        .find("`\"drain\"` alone has a budget of ")
        .unwrap_or_else(|| panic!("{CONFIGURATION}: no sentence on the budget of \"drain\""));
    let budget = number(&text[at..]).expect("a number");
    let file: RoomFile = toml::from_str("room = \"x\"\nfail_policy = \"drain\"").unwrap();
    let layer = file
        .builder()
        .unwrap()
        .secret([7u8; 32])
        .capacity(1)
        .build()
        .unwrap();
    assert_eq!(
        layer.config().fail_policy(),
        FailPolicy::Drain { budget },
        "{CONFIGURATION}: the budget of \"drain\""
    );
}

/// The keys of a settings file, from serde's "unknown field" error, which lists them.
fn file_keys() -> Vec<String> {
    let err = toml::from_str::<RoomFile>("room = \"x\"\nno_such_key = 1")
        .expect_err("an unknown key is refused");
    let message = err.message().to_owned();
    let list = message
        .split("expected one of ")
        .nth(1)
        .unwrap_or_else(|| panic!("serde lists the keys: {message}"));
    list.split(", ")
        .map(|k| k.trim_matches('`').to_owned())
        .collect()
}

/// Every key of a file is in the settings table or in the table of the file's own keys, and
/// every key those tables name is one.
#[test]
fn configuration_tables_have_a_row_for_every_key_of_a_file() {
    // Refused in a file, whatever its value (the secret is never written in the settings).
    const REFUSED: &[&str] = &["secret"];
    let text = read(CONFIGURATION);
    let mut named: BTreeSet<String> = table::rows().iter().map(|r| r.key.to_owned()).collect();
    for row in table(CONFIGURATION, &text, &["key", "default", "value"]) {
        named.insert(setting(&row.cells[0]));
    }
    let keys: BTreeSet<String> = file_keys()
        .into_iter()
        .filter(|k| !REFUSED.contains(&k.as_str()))
        .collect();
    assert!(keys.len() >= 30, "too few keys: {keys:?}");
    assert_eq!(
        named, keys,
        "{CONFIGURATION}: the keys its tables name are not the keys of a file"
    );
}
