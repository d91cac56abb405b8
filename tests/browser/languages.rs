//! The waiting page in the visitor's language, in Chromium: a German and an Arabic browser
//! (their `Accept-Language` set in the browser's preferences) each get the page in their
//! language (`lang`, `dir`, the heading), and as the line moves the page's script updates the
//! position, its sentence and its note in that language, never in English.

use crate::webdriver as browser;

use std::time::Duration;

use fantoccini::Client;
use tower_waiting_room::response::Languages;
use tower_waiting_room::store::Store;
use tower_waiting_room::{RoomPolicy, SessionId};

use super::browser::{eventually, held_room, text};
use browser::{Driver, ONE_BROWSER};

/// The page's `lang` and `dir`, as the browser has them.
async fn lang_and_dir(client: &Client) -> (String, String) {
    let got = client
        .execute(
            "return [document.documentElement.lang, document.documentElement.dir]",
            vec![],
        )
        .await
        .unwrap();
    let got: Vec<String> = serde_json::from_value(got).unwrap();
    (got[0].clone(), got[1].clone())
}

/// One browser speaking `accept_language` waits second in line behind one waiter; the line
/// moves by one, and the page says so in `tag`'s words.
async fn waits_in(room: &str, accept_language: &str, tag: &str, dir: &str) {
    let (site, inside) = held_room(room).await;
    let policy: RoomPolicy = site.layer.config().policy().clone();
    let store = site.store.inner();
    let ahead = SessionId::random();
    store.enter(&policy, ahead).await.unwrap();
    let texts = Languages::built_in(tag).unwrap();
    let english = Languages::built_in("en").unwrap();

    let driver = Driver::start().await;
    let client = driver.browser_speaking(1024, 768, accept_language).await;
    client
        .goto(&format!("http://{}/", site.http.addr))
        .await
        .unwrap();
    assert_eq!(
        lang_and_dir(&client).await,
        (tag.to_owned(), dir.to_owned())
    );
    assert_eq!(
        text(&client, "#twr-heading").await.as_deref(),
        Some(texts.waiting_title.as_str())
    );
    assert_eq!(
        text(&client, "#twr-position-number").await.as_deref(),
        Some(texts.number(2).as_str())
    );

    // The one inside leaves and the one ahead takes the slot: the page's script sees it.
    assert!(store.release(&policy, inside).await.unwrap());
    assert!(matches!(
        store.poll(&policy, ahead).await.unwrap(),
        tower_waiting_room::store::Decision::Admitted { .. }
    ));
    let one = texts.number(1);
    eventually(
        Duration::from_secs(20),
        "the page updates itself to position 1",
        || async { text(&client, "#twr-position-number").await.as_deref() == Some(one.as_str()) },
    )
    .await;
    let sentence = text(&client, "#twr-position").await.unwrap();
    let note = text(&client, "#twr-note").await.unwrap();
    assert_eq!(
        note, texts.auto_update,
        "the note, updated, in the page's language"
    );
    let (before, _) = texts.position.split_once("{position}").unwrap();
    assert!(
        sentence.starts_with(before.trim()),
        "{sentence:?} in {tag}'s words"
    );
    for english in [english.auto_update.as_str(), "You are number", "in line"] {
        assert!(
            !sentence.contains(english) && !note.contains(english),
            "English {english:?} on the {tag} page"
        );
    }
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_german_visitor_waits_in_german() {
    let _one = ONE_BROWSER.lock().await;
    waits_in("sprache", "de-DE,de;q=0.9,en;q=0.5", "de", "ltr").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_arabic_visitor_waits_in_arabic_right_to_left() {
    let _one = ONE_BROWSER.lock().await;
    waits_in("lugha", "ar-EG,ar;q=0.9", "ar", "rtl").await;
}
