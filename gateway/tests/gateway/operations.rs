//! Running the gateway: `--check`, the shipped example, reloads (under load, refused ones),
//! a graceful shutdown, and its own paths (health, metrics, admin).

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::support::*;

/// Polls `f` every 20 ms until it gives a value or `limit` passes.
fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if start.elapsed() >= limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Writes `text` to a file of this test process's scratch directory.
fn write_file(name: &str, text: &str) -> PathBuf {
    let path = scratch("ops").join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The line (from 1) of the `nth` (from 0) line of `text` that contains `needle`.
fn line_of(text: &str, needle: &str, nth: usize) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .nth(nth)
        .unwrap_or_else(|| panic!("`{needle}` not in:\n{text}"))
        .0
        + 1
}

fn example_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/gateway.toml")
}

/// A gateway file with these `[limits]` keys (and a short header-read timeout).
fn with_limits(upstream: &str, limits: &str, rooms: &str) -> String {
    format!(
        "upstream = \"{upstream}\"\n\n[limits]\nheader_read_timeout = \"2s\"\n{limits}\n\n{rooms}"
    )
}

/// The waiter's position from the status endpoint (panics unless waiting).
fn position(addr: SocketAddr, jar: &mut Jar) -> u64 {
    let (status, body) = room_status(addr, "sale", jar);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "waiting", "{body}");
    body["position"].as_u64().unwrap()
}

/// Whether a new TCP connection to `addr` is refused.
fn refused(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err()
}

fn health(addr: SocketAddr) -> Result<Response, String> {
    try_request(
        addr,
        "GET",
        "/__gateway/health",
        &[],
        &mut Jar::default(),
        SHORT,
    )
}

// ---- --check and the command line ----------------------------------------------------------

#[test]
fn check_accepts_a_good_file_and_the_shipped_example() {
    let good = write_file("good.toml", &config("http://127.0.0.1:9", &sale_room(2)));
    let (code, out, err) = run_bin(&["--check", good.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert!(out.contains(": ok:") && out.contains("[\"sale\"]"), "{out}");

    // The example as shipped, with the secret it names set (run_bin sets it).
    let example = example_path();
    let (code, out, err) = run_bin(&["--check", example.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert!(out.contains("rooms [\"sale\"]"), "{out}");
    assert!(out.contains("listen 127.0.0.1:8080"), "{out}");

    // --check reads the secret: without it the example is refused at its room's line.
    let out = Command::new(gateway_bin())
        .arg("--check")
        .arg(&example)
        .env_remove("WAITING_ROOM_SECRET")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let text = std::fs::read_to_string(&example).unwrap();
    let line = line_of(&text, "[[rooms]]", 0);
    let at = format!("{}:{line}:", example.display());
    assert!(
        err.contains(&at) && err.contains("WAITING_ROOM_SECRET"),
        "wanted `{at}`: {err}"
    );
}

#[test]
fn check_refuses_a_bad_file_naming_its_line() {
    let up = "http://127.0.0.1:9";
    let typo_top = format!(
        "upstream = \"{up}\"\nlisten = \"127.0.0.1:0\"\nupstream_timeout = \"5s\"\n\n{}",
        sale_room(1)
    );
    let typo_room = config(
        up,
        &format!("{}capcity = 3\nbypass = [\"/static\"]\n", sale_room(1)),
    );
    let bad_url = "# the app\n\nupstream = \"http://127.0.0.1:9/app\"\n".to_owned();
    let bad_scheme = "listen = \"127.0.0.1:0\"\nupstream = \"ftp://127.0.0.1:9\"\n".to_owned();
    // Two rooms, the second's secret missing: the line is the second room's.
    let no_secret = config(
        up,
        &format!(
            "{}paths = [\"/a\"]\n\n{}",
            sale_room(1),
            sale_room(1)
                .replace("\"sale\"", "\"other\"")
                .replace("WAITING_ROOM_SECRET", "WRG_TEST_SECRET_NOT_SET")
        ),
    );
    // A URL where a host goes, and a gate with a query: each would leave the room covering
    // nothing, or its route open to everyone.
    let url_host = config(
        up,
        &format!("{}hosts = [\"https://launch.example\"]\n", sale_room(1)),
    );
    let query_gate = config(
        up,
        &format!("{}gates = [\"GET /checkout?x=1\"]\n", sale_room(1)),
    );
    let cases: [(&str, &str, usize, &str); 7] = [
        (
            "unknown-top.toml",
            &typo_top,
            line_of(&typo_top, "upstream_timeout", 0),
            "unknown field `upstream_timeout`",
        ),
        (
            "unknown-room.toml",
            &typo_room,
            line_of(&typo_room, "capcity", 0),
            "unknown field `capcity`",
        ),
        (
            "bad-url.toml",
            &bad_url,
            line_of(&bad_url, "upstream", 0),
            "http://127.0.0.1:9/app",
        ),
        (
            "bad-scheme.toml",
            &bad_scheme,
            line_of(&bad_scheme, "upstream", 0),
            "the scheme must be http",
        ),
        (
            "no-secret.toml",
            &no_secret,
            line_of(&no_secret, "[[rooms]]", 1),
            "WRG_TEST_SECRET_NOT_SET",
        ),
        (
            "url-host.toml",
            &url_host,
            line_of(&url_host, "[[rooms]]", 0),
            "host https://launch.example",
        ),
        (
            "query-gate.toml",
            &query_gate,
            line_of(&query_gate, "gates", 0),
            "GET /checkout?x=1",
        ),
    ];
    for (name, text, line, what) in cases {
        let path = write_file(name, text);
        let (code, out, err) = run_bin(&["--check", path.to_str().unwrap()], &[]);
        assert_eq!(code, 1, "{name}: stdout: {out}\nstderr: {err}");
        let at = format!("{}:{line}: ", path.display());
        assert!(err.contains(&at), "{name}: wanted `{at}` in: {err}");
        assert!(err.contains(what), "{name}: wanted `{what}` in: {err}");
        assert!(!out.contains(": ok:"), "{name}: {out}");
    }
}

#[test]
fn help_succeeds_and_an_unknown_flag_fails() {
    for flag in ["--help", "-h"] {
        let (code, out, _) = run_bin(&[flag], &[]);
        assert_eq!(code, 0, "{flag}");
        assert!(
            out.contains("--check FILE") && out.contains("SIGHUP"),
            "{out}"
        );
    }
    let (code, out, err) = run_bin(&["--frobnicate"], &[]);
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("--frobnicate"), "{err}");
    let (code, _, err) = run_bin(&["--check"], &[]);
    assert_ne!(code, 0, "--check without a file: {err}");
    let (code, _, err) = run_bin(&[], &[]);
    assert_ne!(code, 0, "no arguments: {err}");
}

// ---- The shipped example --------------------------------------------------------------------

#[test]
fn the_shipped_example_runs_as_it_is() {
    let app = App::start();
    let text = std::fs::read_to_string(example_path()).unwrap();
    let gw = Gateway::start_with(&text, &["--upstream", &app.url()], &[]);
    // One room covering every path, capacity 2 from the file.
    let _first = admitted(gw.addr, "/", SHORT);
    let _second = admitted(gw.addr, "/shop/deep/page", SHORT);
    let mut third = waiting(gw.addr, "/anything/else");
    let (status, body) = room_status(gw.addr, "sale", &mut third);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["room"], "sale", "{body}");
    assert_eq!(body["position"], 1, "{body}");
    // Its bypass: the waiter still gets the files every page loads.
    let res = get(gw.addr, "/static/app.js", &mut third);
    assert_eq!(res.status, 200, "{}", res.text());
    assert!(res.text().contains("app page /static/app.js"));
    let seen = app.seen();
    assert!(
        !seen.iter().any(|l| l.contains("/anything/else")),
        "{seen:?}"
    );
}

// ---- Reloads --------------------------------------------------------------------------------

/// What one visitor's thread saw during the reload.
struct Seen {
    last_position: Option<u64>,
    inside: bool,
}

#[test]
fn a_reload_under_load_loses_no_request_and_no_place() {
    let app = App::start();
    let gw = Gateway::start(&config(&app.url(), &sale_room(2)));
    let addr = gw.addr;
    let mut inside: Vec<Jar> = (0..2)
        .map(|i| admitted(addr, &format!("/in-{i}"), SHORT))
        .collect();
    let mut waiters: Vec<Jar> = (0..3).map(|i| waiting(addr, &format!("/w-{i}"))).collect();
    for (i, w) in waiters.iter_mut().enumerate() {
        assert_eq!(position(addr, w), i as u64 + 1);
    }
    // Before: /static is queued like any other path.
    let res = get(addr, "/static/before.js", &mut Jar::default());
    assert_eq!(res.status, 302, "{}", res.text());
    let kept_alive_jar = inside[0].clone();

    let stop = AtomicBool::new(false);
    let requests = AtomicUsize::new(0);
    let errors = Mutex::new(Vec::<String>::new());
    let let_in = AtomicUsize::new(0);
    let fail = |e: String| errors.lock().unwrap().push(e);
    let outcome = std::thread::scope(|s| {
        let (stop, requests, fail, let_in) = (&stop, &requests, &fail, &let_in);
        for (i, jar) in inside.iter_mut().enumerate() {
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let path = format!("/in-{i}");
                    match try_request(addr, "GET", &path, &[], jar, SHORT) {
                        Ok(r) if r.status == 200 => {}
                        Ok(r) => fail(format!("admitted {i}: {} {}", r.status, r.text())),
                        Err(e) => fail(format!("admitted {i}: {e}")),
                    }
                    requests.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(5));
                }
            });
        }
        // An admitted visitor's kept-alive connection, across the reload.
        s.spawn(move || {
            let mut jar = kept_alive_jar;
            let mut conn = match KeepAlive::open(addr, SHORT) {
                Ok(c) => c,
                Err(e) => return fail(format!("kept alive: {e}")),
            };
            while !stop.load(Ordering::Relaxed) {
                match conn.get("/kept-alive", &mut jar) {
                    Ok(r) if r.status == 200 => {}
                    Ok(r) => return fail(format!("kept alive: {} {}", r.status, r.text())),
                    Err(e) => return fail(format!("kept alive: {e}")),
                }
                requests.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let watchers: Vec<_> = waiters
            .iter_mut()
            .enumerate()
            .map(|(i, jar)| {
                s.spawn(move || {
                    let mut seen = Seen {
                        last_position: Some(i as u64 + 1),
                        inside: false,
                    };
                    while !stop.load(Ordering::Relaxed) {
                        let (path, headers) = if seen.inside {
                            (format!("/w-{i}"), vec![])
                        } else {
                            (
                                "/__waitingroom/sale/status".to_owned(),
                                vec![("accept", "application/json")],
                            )
                        };
                        let res = match try_request(addr, "GET", &path, &headers, jar, SHORT) {
                            Ok(r) => r,
                            Err(e) => {
                                fail(format!("waiter {i}: {e}"));
                                std::thread::sleep(Duration::from_millis(10));
                                continue;
                            }
                        };
                        requests.fetch_add(1, Ordering::Relaxed);
                        if seen.inside {
                            if res.status != 200 {
                                fail(format!("waiter {i}, let in, then: {}", res.status));
                            }
                        } else if res.status != 200 {
                            fail(format!(
                                "waiter {i}'s status: {} {}",
                                res.status,
                                res.text()
                            ));
                        } else {
                            let body = res.json();
                            match body["state"].as_str() {
                                Some("waiting") => {
                                    let p = body["position"].as_u64();
                                    if p.is_none() || p > seen.last_position {
                                        fail(format!(
                                            "waiter {i}: position {p:?} after {:?}",
                                            seen.last_position
                                        ));
                                    }
                                    seen.last_position = p;
                                }
                                Some("admitted") => {
                                    // Claims the slot, as the waiting page does.
                                    match try_request(addr, "GET", "/claimed", &[], jar, SHORT) {
                                        Ok(r) if r.status == 200 => {
                                            seen.inside = true;
                                            let_in.fetch_add(1, Ordering::Relaxed);
                                        }
                                        Ok(r) => fail(format!("waiter {i} claims: {}", r.status)),
                                        Err(e) => fail(format!("waiter {i} claims: {e}")),
                                    }
                                }
                                _ => fail(format!("waiter {i}: {body}")),
                            }
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    seen
                })
            })
            .collect();

        // Under load: then the file changes (capacity 2 -> 3, /static bypassed) and SIGHUP.
        let loaded = wait_for(SHORT, || {
            (requests.load(Ordering::Relaxed) >= 40).then_some(())
        });
        if loaded.is_none() {
            stop.store(true, Ordering::Relaxed);
            panic!("no load: {:?}", errors.lock().unwrap());
        }
        let after = config(
            &app.url(),
            &format!("{}bypass = [\"/static\"]\n", sale_room(3)),
        );
        std::fs::write(&gw.config, after).unwrap();
        gw.signal("HUP");
        let reloaded = gw.wait_log("reloaded", SHORT);
        let at = requests.load(Ordering::Relaxed);
        // The change takes effect: the first waiter is let in by the new capacity, and a
        // newcomer's /static reaches the app.
        let first_in = wait_for(SHORT, || (let_in.load(Ordering::Relaxed) > 0).then_some(()));
        let more = wait_for(SHORT, || {
            (requests.load(Ordering::Relaxed) >= at + 40).then_some(())
        });
        stop.store(true, Ordering::Relaxed);
        let seen: Vec<Seen> = watchers.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(reloaded, "no `reloaded` in the log:\n{}", gw.log());
        assert!(first_in.is_some(), "nobody let in by the new capacity");
        assert!(more.is_some(), "the load stopped after the reload");
        (seen, at)
    });
    let (seen, at) = outcome;
    let errors = errors.into_inner().unwrap();
    assert!(
        errors.is_empty(),
        "{} failures of {} requests (reload at request {at}): {errors:#?}",
        errors.len(),
        requests.load(Ordering::Relaxed)
    );
    assert!(
        seen[0].inside,
        "the new capacity did not let the first waiter in"
    );
    assert_eq!(
        seen[1].last_position,
        Some(1),
        "the second waiter is now first in line"
    );
    assert_eq!(
        seen[2].last_position,
        Some(2),
        "the third waiter is now second in line"
    );
    assert!(
        !seen[1].inside && !seen[2].inside,
        "more let in than capacity 3"
    );
    assert!(
        gw.log().contains("capacity changed by the file"),
        "{}",
        gw.log()
    );
    let res = get(addr, "/static/after.js", &mut Jar::default());
    assert_eq!(res.status, 200, "the new bypass: {}", res.text());
    assert!(app.seen().iter().any(|l| l == "GET /static/after.js"));
}

/// How many times `needle` is in the log by now, waiting up to `limit` for at least `n`.
fn wait_log_count(gw: &Gateway, needle: &str, n: usize, limit: Duration) -> bool {
    wait_for(limit, || {
        (gw.log().matches(needle).count() >= n).then_some(())
    })
    .is_some()
}

#[test]
fn a_bad_reload_is_refused_and_the_running_file_keeps_serving() {
    let app = App::start();
    let gw = Gateway::start(&config(&app.url(), &sale_room(1)));
    let addr = gw.addr;
    let mut inside = admitted(addr, "/", SHORT);
    let mut waiter = waiting(addr, "/");
    assert_eq!(position(addr, &mut waiter), 1);

    // Each bad file would also raise the capacity to 2, which would let the waiter in.
    let unknown = config(&app.url(), &format!("{}bogus_key = 1\n", sale_room(2)));
    let no_secret = config(
        &app.url(),
        &sale_room(2).replace("WAITING_ROOM_SECRET", "WRG_RELOAD_SECRET_NOT_SET"),
    );
    let other_redis = format!(
        "redis = \"redis://127.0.0.1:1/\"\n{}",
        config(&app.url(), &sale_room(2))
    );
    // Valid as a file, but its request_timeout waits for the next start: against the one in
    // force (60 s), a 120 s wait on the app would be cut short.
    let longer_wait = config(&app.url(), &sale_room(2)).replace(
        "upstream_timeout = \"2s\"",
        "upstream_timeout = \"120s\"\nrequest_timeout = \"300s\"",
    );
    let path = gw.config.display().to_string();
    let bad = [
        (
            &unknown,
            format!(
                "{path}:{}: unknown field `bogus_key`",
                line_of(&unknown, "bogus_key", 0)
            ),
        ),
        (&no_secret, "WRG_RELOAD_SECRET_NOT_SET".to_owned()),
        (&other_redis, "the redis settings changed".to_owned()),
        (
            &longer_wait,
            "must be shorter than the request_timeout in force".to_owned(),
        ),
    ];
    for (n, (text, why)) in bad.iter().enumerate() {
        std::fs::write(&gw.config, text).unwrap();
        gw.signal("HUP");
        assert!(
            wait_log_count(&gw, "reload refused", n + 1, SHORT),
            "reload {n} not refused:\n{}",
            gw.log()
        );
        let log = gw.log();
        let last = log.lines().rfind(|l| l.contains("reload refused")).unwrap();
        assert!(last.contains(why.as_str()), "wanted `{why}` in: {last}");
        assert!(!log.contains("reloaded"), "{log}");
        // Same behaviour as before: the visitor inside stays, the waiter waits at 1.
        let res = get(addr, "/still-inside", &mut inside);
        assert_eq!(res.status, 200, "after bad reload {n}: {}", res.text());
        assert_eq!(position(addr, &mut waiter), 1, "after bad reload {n}");
        assert_eq!(health(addr).unwrap().status, 200);
    }

    // A good file after them is taken, capacity 2 included.
    std::fs::write(&gw.config, config(&app.url(), &sale_room(2))).unwrap();
    gw.signal("HUP");
    assert!(gw.wait_log("reloaded", SHORT), "{}", gw.log());
    let let_in = wait_for(SHORT, || {
        let (_, body) = room_status(addr, "sale", &mut waiter);
        (body["state"] == "admitted").then_some(())
    });
    assert!(
        let_in.is_some(),
        "the good reload's capacity:\n{}",
        gw.log()
    );
    let res = get(addr, "/finally", &mut waiter);
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(get(addr, "/still-inside", &mut inside).status, 200);
}

#[test]
fn a_reload_keeps_the_command_lines_upstream() {
    let app = App::start();
    // The file's upstream has nobody listening: only --upstream reaches the app.
    let file = |capacity| config("http://127.0.0.1:9", &sale_room(capacity));
    let gw = Gateway::start_with(&file(1), &["--upstream", &app.url()], &[]);
    let _first = admitted(gw.addr, "/before", SHORT);
    let mut second = waiting(gw.addr, "/");
    std::fs::write(&gw.config, file(2)).unwrap();
    gw.signal("HUP");
    assert!(gw.wait_log("reloaded", SHORT), "{}", gw.log());
    let let_in = wait_for(SHORT, || {
        let (_, body) = room_status(gw.addr, "sale", &mut second);
        (body["state"] == "admitted").then_some(())
    });
    assert!(let_in.is_some(), "the reload's capacity:\n{}", gw.log());
    let res = get(gw.addr, "/after", &mut second);
    assert_eq!(res.status, 200, "after the reload: {}", res.text());
    assert!(app.seen().iter().any(|l| l == "GET /after"));
}

/// A limit that needs a restart is said to at every reload while it differs from the one in
/// force, not only at the first (after which the running version held the new value).
#[test]
fn a_serving_limit_changed_is_warned_of_at_every_reload_until_a_restart() {
    let app = App::start();
    let gw = Gateway::start(&config(&app.url(), &sale_room(1)));
    let changed =
        config(&app.url(), &sale_room(1)).replace("[limits]\n", "[limits]\nmax_connections = 77\n");
    std::fs::write(&gw.config, changed).unwrap();
    let warning = "the serving limits changed";
    for reload in 1..=2 {
        gw.signal("HUP");
        let warned = wait_for(SHORT, || {
            (gw.log().matches(warning).count() == reload).then_some(())
        });
        assert!(warned.is_some(), "reload {reload}:\n{}", gw.log());
    }
}

// ---- Shutdown -------------------------------------------------------------------------------

/// Sends `GET path` on a thread: its answer.
fn in_flight(
    addr: SocketAddr,
    path: &'static str,
    jar: &Jar,
) -> std::thread::JoinHandle<Result<Response, String>> {
    let mut jar = jar.clone();
    std::thread::spawn(move || try_request(addr, "GET", path, &[], &mut jar, SHORT * 2))
}

fn wait_seen(app: &App, line: &str) {
    let seen = wait_for(SHORT, || app.seen().iter().any(|l| l == line).then_some(()));
    assert!(
        seen.is_some(),
        "the app never got `{line}`: {:?}",
        app.seen()
    );
}

#[test]
fn sigterm_lets_the_request_in_flight_finish_and_refuses_new_connections() {
    let app = App::start();
    let mut gw = Gateway::start(&with_limits(&app.url(), "grace = \"5s\"", &sale_room(5)));
    let addr = gw.addr;
    let mut jar = admitted(addr, "/", SHORT);
    // A kept-alive connection, idle when the signal comes: it must not hold the exit.
    let mut idle = KeepAlive::open(addr, SHORT).unwrap();
    assert_eq!(idle.get("/idle", &mut jar).unwrap().status, 200);
    let slow = in_flight(addr, "/slow?s=2", &jar);
    wait_seen(&app, "GET /slow?s=2");
    let t0 = Instant::now();
    gw.signal("TERM");
    // The listener closes at once, while the slow request is still running.
    assert!(
        wait_for(SHORT, || refused(addr).then_some(())).is_some(),
        "new connections still accepted"
    );
    assert!(
        !slow.is_finished(),
        "the listener closed only after the request"
    );
    let res = slow
        .join()
        .unwrap()
        .expect("the request in flight finishes");
    assert_eq!(res.status, 200, "{}", res.text());
    assert!(res.text().contains("slow page"));
    // Out once the last request is answered, well within the grace (5 s).
    let code = gw.wait_exit(Duration::from_millis(1500));
    assert_eq!(
        code,
        Some(0),
        "not out {:?} after the signal:\n{}",
        t0.elapsed(),
        gw.log()
    );
    assert!(gw.log().contains("stopped"), "{}", gw.log());
    drop(idle);
}

#[test]
fn the_grace_bounds_the_shutdown() {
    let app = App::start();
    let mut gw = Gateway::start(&with_limits(&app.url(), "grace = \"1s\"", &sale_room(5)));
    let addr = gw.addr;
    let jar = admitted(addr, "/", SHORT);
    let slow = in_flight(addr, "/slow?s=6", &jar);
    wait_seen(&app, "GET /slow?s=6");
    let t0 = Instant::now();
    gw.signal("TERM");
    let code = gw.wait_exit(Duration::from_secs(3));
    let took = t0.elapsed();
    assert_eq!(
        code,
        Some(0),
        "not out 3 s after a 1 s grace:\n{}",
        gw.log()
    );
    assert!(
        took >= Duration::from_millis(900),
        "no grace at all: {took:?}"
    );
    let res = slow.join().unwrap();
    assert!(
        res.as_ref().map_or(true, |r| r.status != 200),
        "the cut request: {res:?}"
    );
}

#[test]
fn during_the_shutdown_delay_health_says_503_and_requests_still_work() {
    let app = App::start();
    let limits = "grace = \"5s\"\nshutdown_delay = \"1s\"";
    let mut gw = Gateway::start(&with_limits(&app.url(), limits, &sale_room(5)));
    let addr = gw.addr;
    let mut jar = admitted(addr, "/", SHORT);
    assert_eq!(health(addr).unwrap().status, 200);
    let t0 = Instant::now();
    gw.signal("TERM");
    let draining = wait_for(SHORT, || health(addr).ok().filter(|r| r.status == 503));
    let draining = draining.expect("health never said 503");
    assert!(draining.text().contains("draining"), "{}", draining.text());
    // Still serving during the delay, on new connections.
    let res = try_request(addr, "GET", "/during-delay", &[], &mut jar, SHORT)
        .expect("a request during the delay");
    assert_eq!(res.status, 200, "{}", res.text());
    let during = t0.elapsed();
    assert!(
        during < Duration::from_secs(1),
        "too slow to tell: {during:?}"
    );
    assert_eq!(health(addr).unwrap().status, 503);
    // Then it stops accepting, no sooner than the delay.
    let closed = wait_for(SHORT, || refused(addr).then(|| t0.elapsed()));
    let closed = closed.expect("never stopped accepting");
    assert!(
        closed >= Duration::from_millis(900),
        "closed after {closed:?}"
    );
    assert_eq!(gw.wait_exit(SHORT), Some(0), "{}", gw.log());
    assert!(app.seen().iter().any(|l| l == "GET /during-delay"));
}

// ---- The gateway's own paths ----------------------------------------------------------------

#[test]
fn metrics_with_a_token_are_answered_only_to_its_bearer() {
    const METRICS_TOKEN: &str = "wrg-test-metrics-token-0123456789abcdef-012345";
    let app = App::start();
    let rooms = format!(
        "[metrics]\ntoken_env = \"WRG_TEST_METRICS_TOKEN\"\n\n{}",
        sale_room(5)
    );
    let gw = Gateway::start_with(
        &config(&app.url(), &rooms),
        &[],
        &[("WRG_TEST_METRICS_TOKEN", METRICS_TOKEN)],
    );
    let addr = gw.addr;
    let same_length = format!("Bearer {}", "x".repeat(METRICS_TOKEN.len()));
    let longer = format!("Bearer {METRICS_TOKEN}0");
    let shorter = format!("Bearer {}", &METRICS_TOKEN[..METRICS_TOKEN.len() - 1]);
    for auth in [
        None,
        Some(same_length.as_str()),
        Some(longer.as_str()),
        Some(shorter.as_str()),
        Some(METRICS_TOKEN),
    ] {
        let headers: Vec<(&str, &str)> = auth.map(|a| ("authorization", a)).into_iter().collect();
        let res = request(
            addr,
            "GET",
            "/__gateway/metrics",
            &headers,
            b"",
            &mut Jar::default(),
        );
        assert_eq!(res.status, 401, "{auth:?}: {}", res.text());
        assert_eq!(
            res.header("www-authenticate"),
            Some("Bearer realm=\"metrics\""),
            "{auth:?}"
        );
        assert!(!res.text().contains("waiting_room_"), "{}", res.text());
    }
    let auth = format!("Bearer {METRICS_TOKEN}");
    let res = request(
        addr,
        "GET",
        "/__gateway/metrics",
        &[("authorization", &auth)],
        b"",
        &mut Jar::default(),
    );
    assert_eq!(res.status, 200, "{}", res.text());
    assert!(
        res.text()
            .contains("waiting_room_gateway_upstream_errors_total"),
        "{}",
        res.text()
    );
    assert!(
        app.seen().iter().all(|l| !l.contains("__gateway")),
        "{:?}",
        app.seen()
    );
}

#[test]
fn health_metrics_and_admin_are_answered_by_the_gateway() {
    let app = App::start();
    let rooms = format!(
        "[admin]\ntoken_env = \"WRG_TEST_ADMIN_TOKEN\"\n\n{}",
        sale_room(1)
    );
    let gw = Gateway::start_with(
        &config(&app.url(), &rooms),
        &[],
        &[("WRG_TEST_ADMIN_TOKEN", ADMIN_TOKEN)],
    );
    let addr = gw.addr;
    let _inside = admitted(addr, "/", SHORT);
    let mut waiter = waiting(addr, "/");

    // Health: 200 for anyone, a waiter or a newcomer while the room is full; never queued.
    for jar in [&mut waiter, &mut Jar::default()] {
        let res = get(addr, "/__gateway/health", jar);
        assert_eq!((res.status, res.text().as_str()), (200, "ok\n"));
        assert!(res.header("set-cookie").is_none(), "{:?}", res.headers);
    }

    // Metrics: Prometheus' text with the room's series.
    let res = get(addr, "/__gateway/metrics", &mut Jar::default());
    assert_eq!(res.status, 200, "{}", res.text());
    assert!(res
        .header("content-type")
        .unwrap()
        .starts_with("text/plain"));
    let text = res.text();
    for name in [
        "waiting_room_requests_total",
        "waiting_room_store_calls_total",
        "waiting_room_store_call_seconds",
        "waiting_room_waiting",
        "waiting_room_inside",
        "waiting_room_granted",
    ] {
        assert!(text.contains(name), "no {name} in:\n{text}");
    }
    // The app's failures, none yet: at zero from the start, not missing until the first.
    for reason in ["connect", "protocol", "timeout"] {
        let series = format!("waiting_room_gateway_upstream_errors_total{{reason=\"{reason}\"}} 0");
        assert!(text.contains(&series), "no {series} in:\n{text}");
    }
    let value = |name: &str| -> Option<String> {
        text.lines()
            .find(|l| l.starts_with(&format!("{name}{{")) && l.contains("room=\"sale\""))
            .and_then(|l| l.rsplit(' ').next())
            .map(str::to_owned)
    };
    assert_eq!(value("waiting_room_inside").as_deref(), Some("1"), "{text}");
    assert_eq!(
        value("waiting_room_waiting").as_deref(),
        Some("1"),
        "{text}"
    );

    // Admin: the bearer token, or 401.
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let json = [("accept", "application/json")];
    let res = request(
        addr,
        "GET",
        "/__gateway/admin/rooms",
        &[("authorization", &auth), json[0]],
        b"",
        &mut Jar::default(),
    );
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(res.json()["rooms"], serde_json::json!(["sale"]));
    let res = request(
        addr,
        "GET",
        "/__gateway/admin/rooms/sale",
        &[("authorization", &auth), json[0]],
        b"",
        &mut Jar::default(),
    );
    assert_eq!(res.status, 200, "{}", res.text());
    let room = res.json();
    assert_eq!(
        (&room["capacity"], &room["inside"], &room["waiting"]),
        (
            &serde_json::json!(1),
            &serde_json::json!(1),
            &serde_json::json!(1)
        ),
        "{room}"
    );
    let res = request(
        addr,
        "GET",
        "/__gateway/admin/rooms",
        &json,
        b"",
        &mut waiter,
    );
    assert_eq!(res.status, 401, "{}", res.text());
    assert!(res
        .header("www-authenticate")
        .is_some_and(|h| h.starts_with("Bearer")));
    let wrong = format!("Bearer {}", ADMIN_TOKEN.replace('0', "1"));
    let res = request(
        addr,
        "GET",
        "/__gateway/admin/rooms",
        &[("authorization", &wrong), json[0]],
        b"",
        &mut Jar::default(),
    );
    assert_eq!(res.status, 401, "{}", res.text());

    // Without [admin], its paths are not found, and still not the app's.
    let plain = Gateway::start(&config(&app.url(), &sale_room(1)));
    let res = request(
        plain.addr,
        "GET",
        "/__gateway/admin/rooms",
        &[("authorization", &auth)],
        b"",
        &mut Jar::default(),
    );
    assert_eq!(res.status, 404, "{}", res.text());

    let seen = app.seen();
    assert!(seen.iter().any(|l| l == "GET /"), "{seen:?}");
    assert!(!seen.iter().any(|l| l.contains("/__gateway")), "{seen:?}");
}

// ---- Signals right after the start ----------------------------------------------------------

#[test]
fn a_sighup_right_after_the_listening_line_reloads() {
    let app = App::start();
    for attempt in 0..5 {
        let mut gw = Gateway::start(&config(&app.url(), &sale_room(1)));
        gw.signal("HUP");
        assert_eq!(
            gw.wait_exit(Duration::from_millis(300)),
            None,
            "attempt {attempt}: SIGHUP ended the gateway"
        );
        assert_eq!(health(gw.addr).map(|r| r.status), Ok(200));
    }
}

#[test]
fn a_sigterm_right_after_the_listening_line_is_a_graceful_stop() {
    let app = App::start();
    for attempt in 0..5 {
        let mut gw = Gateway::start(&config(&app.url(), &sale_room(1)));
        gw.signal("TERM");
        assert_eq!(
            gw.wait_exit(SHORT),
            Some(0),
            "attempt {attempt}: not a graceful stop:\n{}",
            gw.log()
        );
    }
}

/// A room of the file with `auto_capacity`: the gateway measures what it proxies, and after
/// a window of fast answers with a line waiting, raises the capacity; the admin shows why.
#[test]
fn a_room_with_auto_capacity_follows_the_app_through_the_gateway() {
    let app = App::start();
    let mut room = AutoRoom::start(&app);
    assert_eq!(room.status()["auto"]["enabled"], true, "{}", room.status());
    // Requests through the gateway until a window has passed and a decision is made.
    let decided = room.requests_until(|status| status["auto"]["change"] == "grow");
    let status = room.status();
    assert!(decided, "no decision: {status}");
    assert_eq!(status["auto"]["reason"], "headroom", "{status}");
    assert_eq!(
        status["capacity"], 3,
        "two inside, a line: by half: {status}"
    );
    assert!(
        status["auto"]["samples"].as_u64().unwrap() >= 20,
        "{status}"
    );
}
