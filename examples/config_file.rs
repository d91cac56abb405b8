//! The waiting room configured from a TOML file (`examples/room.toml`), its signing secret from
//! the environment variable the file names, in front of a tiny axum app.
//!
//! ```text
//! WAITING_ROOM_SECRET="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
//!     cargo run --example config_file -- examples/room.toml
//! ```
//!
//! then open <http://127.0.0.1:3000> in three browser profiles: with the file's capacity of 2,
//! the third waits in line. The path argument is optional (default `examples/room.toml`).
//! The keys, their defaults and the environment-variable form (`WR_CAPACITY=5` ...) are in
//! `docs/configuration.md`. It serves as the demo does (`tower_waiting_room::serve`): slow
//! clients are hung up on, connections are capped, and each request carries its connection's
//! address.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;

use axum::extract::Extension;
use axum::routing::get;
use axum::Router;
use tower_waiting_room::config::RoomFile;
use tower_waiting_room::serve::Limits;
use tower_waiting_room::{Admission, WaitingRoomLayer};

/// Reads the settings file and builds the layer; the error says which step failed, and why.
fn load(path: &str) -> Result<WaitingRoomLayer, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let settings: RoomFile = toml::from_str(&text).map_err(|e| {
        // TOML's full error quotes the offending line, which could hold a secret someone
        // pasted in by mistake: print the line number and the message only.
        let line = e
            .span()
            .map_or(0, |span| text[..span.start].matches('\n').count() + 1);
        format!("{path}, line {line}: {}", e.message())
    })?;
    let builder = settings.builder().map_err(|e| format!("{path}: {e}"))?;
    // Anything the file does not hold goes here: `.store(..)`, `.renderer(..)`, `.bypass(..)`.
    let builder = builder.bypass(|req| req.path() == "/healthz");
    builder.build().map_err(|e| format!("{path}: {e}"))
}

async fn home(admission: Option<Extension<Admission>>) -> String {
    match admission {
        Some(Extension(a)) => format!(
            "You are in room {} (admitted by {:?}).\n",
            a.room(),
            a.admitted_by()
        ),
        None => "Not behind the waiting room.\n".to_owned(),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "examples/room.toml".to_owned());
    let layer = match load(&path) {
        Ok(layer) => layer,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let app = Router::new()
        .route("/", get(home))
        .route("/healthz", get(|| async { "ok\n" }))
        // The room's own endpoints (`/__waitingroom/...`) reach the layer through the fallback.
        .fallback(|| async { (axum::http::StatusCode::NOT_FOUND, "not found\n") })
        .layer(layer.clone());

    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 3000));
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let config = layer.config();
    println!(
        "waiting room {:?} from {path}: capacity {}; open http://{addr}/",
        config.room(),
        config.policy().capacity
    );
    // Within limits a slow client cannot outlast, with each connection's address in its
    // requests, so the per-IP limit on new visitors sees who is who; until Ctrl-C or SIGTERM,
    // then open connections get the grace to finish.
    let stop = tower_waiting_room::serve::shutdown_signal();
    tower_waiting_room::serve::serve(listener, app, Limits::default(), stop).await;
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_file_loads() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/room.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let settings: RoomFile = toml::from_str(&text).unwrap();
        assert_eq!(settings.room(), "demo");
        // Its secret comes from the environment; here, the same settings with one in code.
        let without = text.replace("secret_env = \"WAITING_ROOM_SECRET\"", "");
        assert_ne!(without, text);
        let settings: RoomFile = toml::from_str(&without).unwrap();
        let layer = settings
            .builder()
            .unwrap()
            .secret([7u8; 32])
            .build()
            .unwrap();
        assert_eq!(layer.config().room(), "demo");
        assert_eq!(layer.config().policy().capacity, 2);
        assert!(!layer.config().cookies().secure());
    }

    #[test]
    fn a_bad_file_is_an_error_with_its_line() {
        let path = std::env::temp_dir().join(format!("room-bad-{}.toml", std::process::id()));
        std::fs::write(&path, "room = \"x\"\nsecret = \"hunter2\"\n").unwrap();
        let err = load(path.to_str().unwrap()).err().unwrap();
        assert!(err.contains("line 2: secret:"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        std::fs::write(&path, "room = \"x\"\ncapcity = 2\n").unwrap();
        let err = load(path.to_str().unwrap()).err().unwrap();
        assert!(err.contains("line 2: unknown field `capcity`"), "{err}");
        std::fs::remove_file(&path).ok();
    }
}
