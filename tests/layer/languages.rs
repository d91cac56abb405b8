//! The pages in the visitor's language, over real HTTP: each built-in language's waiting page
//! (its `lang`, `dir`, `Content-Language`, no English left in its visible text, every
//! placeholder filled, numbers in its digits), the choice from `Accept-Language` (preference,
//! RFC 4647 lookup, the room's default), hostile headers (the default language, never a 500),
//! a room that offers a few languages with the app's own words, and the JSON staying
//! language-neutral.

use crate::common;

use http::header::{self, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use tower_waiting_room::response::{Languages, Texts, BUILT_IN_LANGUAGES};
use tower_waiting_room::WaitingRoomLayer;

use common::*;

/// A room of one, held, with `waiters` in line: the next visitor waits behind them.
async fn full_site(builder: tower_waiting_room::WaitingRoomBuilder, waiters: usize) -> Site {
    let site = Site::start(builder.capacity(1)).await;
    let mut holder = Jar::new();
    site.http.visit(&mut holder, Method::GET, "/").await;
    let r = site.http.visit(&mut holder, Method::GET, "/").await;
    assert_eq!(r.status, StatusCode::OK, "the holder is let in");
    for _ in 0..waiters {
        let mut w = Jar::new();
        site.http.visit(&mut w, Method::GET, "/").await;
        site.http.visit(&mut w, Method::GET, "/").await;
    }
    site
}

/// The waiting page a browser asking in `accept_language` gets (a new waiter's).
async fn page(site: &Site, accept_language: &str) -> Reply {
    let mut jar = Jar::new();
    let headers = [
        (
            header::ACCEPT,
            HeaderValue::from_static("text/html,application/xhtml+xml,*/*;q=0.8"),
        ),
        (
            header::ACCEPT_LANGUAGE,
            HeaderValue::from_str(accept_language).unwrap(),
        ),
    ];
    site.http
        .visit_with(&mut jar, Method::GET, "/", &headers)
        .await;
    let r = site
        .http
        .visit_with(&mut jar, Method::GET, "/", &headers)
        .await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.text());
    r
}

/// The text a visitor reads: the page without its script, style, tags and attributes.
fn visible(page: &str) -> String {
    let mut page = page.to_owned();
    for (open, close) in [("<script>", "</script>"), ("<style>", "</style>")] {
        while let Some(at) = page.find(open) {
            let end = page[at..]
                .find(close)
                .map_or(page.len(), |e| at + e + close.len());
            page.replace_range(at..end, " ");
        }
    }
    let mut text = String::new();
    let mut in_tag = false;
    for c in page.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                text.push(' ');
            }
            _ if !in_tag => text.push(c),
            _ => {}
        }
    }
    text.replace("&amp;", "&")
        .replace("&#39;", "'")
        .replace("&quot;", "\"")
}

fn texts_number(tag: &str, n: u64) -> String {
    Languages::built_in(tag).unwrap().number(n)
}

/// The English words of the waiting page, which no other language's page may show.
fn english() -> Vec<String> {
    let en = Texts::default();
    let mut words = vec![
        en.eyebrow,
        en.waiting_title,
        en.ahead_label,
        en.waiting_label,
        en.eta_label,
        en.leave_button,
        en.eta_estimating,
        en.eta_unknown,
        en.auto_update,
    ];
    words.extend(
        en.position
            .split("{position}")
            .map(str::trim)
            .map(str::to_owned),
    );
    words.retain(|w| w.len() > 3);
    words
}

#[tokio::test]
async fn every_built_in_language_has_a_waiting_page_of_its_own() {
    let site = full_site(WaitingRoomLayer::builder("langs"), 1_233).await;
    let english_page = page(&site, "en").await.text();
    let mut sizes = Vec::new();
    for (i, tag) in BUILT_IN_LANGUAGES.into_iter().enumerate() {
        let r = page(&site, tag).await;
        let html = r.text();
        let dir = if tag == "ar" || tag == "fa" {
            "rtl"
        } else {
            "ltr"
        };
        assert!(
            html.contains(&format!("<html lang=\"{tag}\" dir=\"{dir}\">")),
            "{tag}: {}",
            &html[..200]
        );
        assert_eq!(r.header(header::CONTENT_LANGUAGE), Some(tag));
        assert!(
            r.headers
                .get_all(header::VARY)
                .iter()
                .any(|v| v.to_str().unwrap().contains("Accept-Language")),
            "{tag}: Vary"
        );
        let text = visible(&html);
        assert!(
            !text.contains('{') && !text.contains('}'),
            "{tag}: a placeholder left: {text}"
        );
        if tag != "en" {
            for word in english() {
                assert!(!text.contains(&word), "{tag}: English {word:?} in {text}");
            }
        }
        // One inside and 1 233 waiting, then each page's newcomer behind the one before: the
        // English page's at 1 234, this one's after it. In the language's digits and grouping.
        let texts = Languages::built_in(tag).unwrap();
        let position = texts.number(1_235 + i as u64);
        assert!(
            html.contains(&format!(
                "<strong id=\"twr-position-number\">{position}</strong>"
            )),
            "{tag}: position {position}"
        );
        sizes.push((tag, html.len() as i64 - english_page.len() as i64));
    }
    eprintln!("bytes over the English page: {sizes:?}");
    // docs/languages.md gives these: a few hundred bytes for most, more where every letter
    // takes two bytes (Cyrillic, Arabic, Persian).
    for (tag, over) in &sizes {
        assert!(*over <= 1_500, "{tag}: {over} bytes over the English page");
    }
    let persian = texts_number("fa", 1_252);
    assert_eq!(persian, "۱\u{66c}۲۵۲", "Persian digits and separator");
    assert!(page(&site, "fa").await.text().contains(&persian));
}

#[tokio::test]
async fn accept_language_picks_the_first_offered_by_preference() {
    let site = full_site(WaitingRoomLayer::builder("pick"), 0).await;
    for (header, want) in [
        ("de-CH, de;q=0.9, en;q=0.8", "de"),
        ("fr;q=0.5, ja;q=0.9", "ja"),
        ("sv, da;q=0.9, nl;q=0.1", "nl"),
        ("zh-Hant-TW", "zh-TW"),
        ("zh-HK", "zh-TW"),
        ("zh", "zh-CN"),
        ("pt-PT, en;q=0.5", "pt-BR"),
        ("es-419", "es"),
        ("ar-EG", "ar"),
        ("*", "en"),
        ("de;q=0, fr", "fr"),
        ("sv", "en"),
    ] {
        let r = page(&site, header).await;
        assert_eq!(r.header(header::CONTENT_LANGUAGE), Some(want), "{header}");
    }
}

#[tokio::test]
async fn a_hostile_accept_language_gets_the_default_never_an_error() {
    let site = full_site(WaitingRoomLayer::builder("hostile"), 0).await;
    let long = format!("{}de", "x-".repeat(2_040));
    let many = (0..1_000)
        .map(|i| format!("x{i};q=0.{i:03}"))
        .collect::<Vec<_>>()
        .join(",");
    let malformed = "de;q=2, fr;q=abc, ja;q=0.1234, ko;q=-1, ru;q=, ;q=1, *;q=x";
    for header in [long.as_str(), many.as_str(), malformed, ",,,;;;", "q=1"] {
        let r = page(&site, header).await;
        assert_eq!(
            r.header(header::CONTENT_LANGUAGE),
            Some("en"),
            "{}",
            &header[..20.min(header.len())]
        );
    }
}

#[tokio::test]
async fn a_room_offers_its_languages_with_the_apps_own_words() {
    let mut de = Languages::built_in("de").unwrap();
    de.waiting_title = "Gleich sind Sie dran".into();
    let languages = Languages::only(["en", "de", "ar"])
        .unwrap()
        .default_language("de")
        .unwrap()
        .with_texts(de);
    let site = full_site(WaitingRoomLayer::builder("few").languages(languages), 0).await;
    let r = page(&site, "de-AT").await;
    assert!(
        r.text().contains("Gleich sind Sie dran"),
        "the app's words win"
    );
    let r = page(&site, "fr, ja").await;
    assert_eq!(
        r.header(header::CONTENT_LANGUAGE),
        Some("de"),
        "not offered: the default"
    );
    let r = page(&site, "ar").await;
    assert!(r.text().contains("dir=\"rtl\""));

    // One language for everyone: no Vary, whatever the visitor asks for.
    let site = full_site(
        WaitingRoomLayer::builder("one").languages(Languages::only(["ja"]).unwrap()),
        0,
    )
    .await;
    let r = page(&site, "de").await;
    assert_eq!(r.header(header::CONTENT_LANGUAGE), Some("ja"));
    assert!(r
        .header(header::VARY)
        .is_none_or(|v| !v.contains("Accept-Language")));
}

#[tokio::test]
async fn the_json_status_says_no_words() {
    let site = full_site(WaitingRoomLayer::builder("json"), 0).await;
    let mut jar = Jar::new();
    let de: [(HeaderName, HeaderValue); 1] =
        [(header::ACCEPT_LANGUAGE, HeaderValue::from_static("de"))];
    site.http.visit_with(&mut jar, Method::GET, "/", &de).await;
    let r = site.http.visit_with(&mut jar, Method::GET, "/", &de).await;
    assert_eq!(r.header(header::CONTENT_TYPE), Some("application/json"));
    assert!(r.header(header::CONTENT_LANGUAGE).is_none());
    let body = r.json();
    assert_eq!(body["state"], "waiting");
    for (key, value) in body.as_object().unwrap() {
        if let Some(s) = value.as_str() {
            assert!(
                s.is_ascii() && !s.contains(' '),
                "{key}: {s:?} is a word, not a state"
            );
        }
    }
}
