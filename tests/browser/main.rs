//! The waiting page and the admin page in a real browser (chromium through
//! chromedriver), in one binary; the tests take `webdriver::ONE_BROWSER`, one browser at a time.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/browser.rs"]
mod webdriver;

#[cfg(feature = "admin")]
mod admin_browser;
mod browser;
mod browser_countdown;
mod languages;
