//! What the examples share: their log, and how they print a Redis URL. (Not an example: a
//! folder without a `main.rs`; each example includes it with `#[path]`.) They serve with
//! [`tower_waiting_room::serve`].
#![allow(dead_code)]

/// The log (the crate's and any other) on stderr, at `info` unless `RUST_LOG` says otherwise;
/// stdout keeps the lines meant for people and scripts (`open http://...`).
/// `RUST_LOG` takes `level` and `target=level` directives, comma-separated
/// (`info,tower_waiting_room=debug`); one it cannot read leaves the log at `info`.
pub fn init_logging() {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|directives| directives.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::INFO));
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .finish()
        .with(filter)
        .init();
}

/// `url` with its user and password (if any) replaced by `***`, for printing.
pub fn without_password(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_printed_redis_url_hides_its_password() {
        assert_eq!(
            super::without_password("redis://:hunter2@127.0.0.1:6379/"),
            "redis://***@127.0.0.1:6379/"
        );
        assert_eq!(super::without_password("redis://h:1/"), "redis://h:1/");
    }
}
