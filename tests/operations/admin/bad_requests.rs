//! Bad requests: every bad input with its status and message, changing nothing, and what a
//! caller put in the path echoed back capped.

use super::clients::{arrive, room_path, settings, Admin};
use super::memory_gateway;

use http::header;
use http::{Method, StatusCode};

// ===== bad requests =====

/// A request (method, path, content type, body) and what it must get (status, part of the error).
type Case<'a> = (
    Method,
    &'a str,
    Option<&'a str>,
    Vec<u8>,
    StatusCode,
    &'a str,
);

#[tokio::test]
async fn bad_values_are_400_with_a_message_and_change_nothing() {
    let (g, _layer) = memory_gateway().await;
    let admin = Admin::new(&g);
    let (_waiter_jar, _) = arrive(&g).await;
    let before = settings(&admin.status().await);
    let room = room_path();
    let release = format!("{room}/release");
    let json_ct = Some("application/json");
    let not_hex = format!("{room}/sessions/not-hex");
    let short_hex = format!("{room}/sessions/{}", "ab".repeat(15));
    let cases: Vec<Case> = vec![
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capacity": 0}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "capacity must be at least 1",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capacity": -1}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "capacity must be a whole number",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capacity": 2.5}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "capacity must be a whole number",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capacity": "10"}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "capacity must be a whole number",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capacity": 99999999999}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "capacity must be a whole number",
        ),
        // Whole numbers written as decimals are refused, saying so.
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capacity": 1e3}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "capacity must be a whole number from 1 to 4294967295, written without a decimal \
             point or exponent (as 1000), not 1000.0",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capacity": -0}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "written without a decimal point or exponent, not -0.0",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"rate": 20.0}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "written without a decimal point or exponent (as 20)",
        ),
        (
            Method::POST,
            &release,
            json_ct,
            br#"{"count": 2E0}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "written without a decimal point or exponent (as 2)",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"rate": 0}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "null removes the limit",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"rate": -5}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "rate must be a whole number",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"paused": "yes"}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "paused must be true or false",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"open": 0}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "open must be true or false",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capcity": 5}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "unknown field \"capcity\"",
        ),
        // One bad field spoils the whole change: the good one is not applied either.
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"paused": true, "capacity": 0}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "capacity",
        ),
        // A field given twice is refused, not read as its last value.
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"capacity": 0, "capacity": 7}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "`capacity` given twice",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"paused": true, "paused": false}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "`paused` given twice",
        ),
        (
            Method::POST,
            &release,
            json_ct,
            br#"{"count": 1, "count": 2}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "`count` given twice",
        ),
        // And inside a member: the controller's terms are not read as the last given.
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"auto": {"enabled": true, "min": 1, "min": 9}}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "a bad body: `min` given twice",
        ),
        // `end_slots` is `true` with `"open": false` or nothing: never a silent no-op.
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"end_slots": false}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "end_slots",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"open": true, "end_slots": false}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "end_slots",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"open": false, "end_slots": false}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "end_slots",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{"end_slots": true}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "end_slots goes with",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"{}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "nothing to change",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            br#"[1]"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "must be a JSON object",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            b"capacity=5".to_vec(),
            StatusCode::BAD_REQUEST,
            "not JSON",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            b"".to_vec(),
            StatusCode::BAD_REQUEST,
            "empty",
        ),
        (
            Method::PATCH,
            &room,
            Some("text/plain"),
            br#"{"capacity": 5}"#.to_vec(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "application/json",
        ),
        (
            Method::PATCH,
            &room,
            None,
            br#"{"capacity": 5}"#.to_vec(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "application/json",
        ),
        (
            Method::PATCH,
            &room,
            json_ct,
            format!(r#"{{"capacity": 5, "pad": "{}"}}"#, "x".repeat(20_000)).into_bytes(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "larger than 16384 bytes",
        ),
        (
            Method::POST,
            &release,
            json_ct,
            br#"{"count": 0}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "count must be at least 1",
        ),
        (
            Method::POST,
            &release,
            json_ct,
            br#"{"count": -1}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "count must be a whole number",
        ),
        (
            Method::POST,
            &release,
            json_ct,
            br#"{"count": "1"}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "count must be a whole number",
        ),
        (
            Method::POST,
            &release,
            json_ct,
            br#"{}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "count is missing",
        ),
        (
            Method::POST,
            &release,
            json_ct,
            br#"{"count": 1, "all": true}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "unknown field \"all\"",
        ),
        (
            Method::POST,
            &release,
            json_ct,
            b"1".to_vec(),
            StatusCode::BAD_REQUEST,
            "{\"count\": n}",
        ),
        (
            Method::DELETE,
            &not_hex,
            None,
            vec![],
            StatusCode::BAD_REQUEST,
            "32 hex digits",
        ),
        (
            Method::DELETE,
            &short_hex,
            None,
            vec![],
            StatusCode::BAD_REQUEST,
            "32 hex digits",
        ),
        (
            Method::GET,
            "/admin/rooms/elsewhere",
            None,
            vec![],
            StatusCode::NOT_FOUND,
            "no room \"elsewhere\"",
        ),
        (
            Method::PATCH,
            "/admin/rooms/elsewhere",
            json_ct,
            br#"{"capacity": 5}"#.to_vec(),
            StatusCode::NOT_FOUND,
            "no room",
        ),
        (
            Method::POST,
            "/admin/rooms/elsewhere/release",
            json_ct,
            br#"{"count": 5}"#.to_vec(),
            StatusCode::NOT_FOUND,
            "no room",
        ),
        (
            Method::GET,
            "/admin/rooms/launch/what",
            None,
            vec![],
            StatusCode::NOT_FOUND,
            "no such admin path",
        ),
        (
            Method::PUT,
            &room,
            json_ct,
            br#"{"capacity": 5}"#.to_vec(),
            StatusCode::METHOD_NOT_ALLOWED,
            "allowed: GET, HEAD, PATCH",
        ),
        (
            Method::GET,
            &release,
            None,
            vec![],
            StatusCode::METHOD_NOT_ALLOWED,
            "allowed: POST",
        ),
        (
            Method::POST,
            "/admin/rooms",
            json_ct,
            b"{}".to_vec(),
            StatusCode::METHOD_NOT_ALLOWED,
            "allowed: GET, HEAD",
        ),
    ];
    for (method, path, ct, body, status, message) in cases {
        let shown = String::from_utf8_lossy(&body[..body.len().min(60)]).into_owned();
        let r = admin.send(method.clone(), path, ct, &body).await;
        assert_eq!(r.status, status, "{method} {path} {shown}: {}", r.text());
        assert_eq!(r.header(header::CONTENT_TYPE), Some("application/json"));
        let error = r.json()["error"].as_str().unwrap_or_default().to_owned();
        assert!(
            error.contains(message),
            "{method} {path} {shown}: {error:?} lacks {message:?}"
        );
        if status == StatusCode::METHOD_NOT_ALLOWED {
            assert_eq!(
                r.header(header::ALLOW),
                Some(message.trim_start_matches("allowed: "))
            );
        }
        assert_eq!(
            settings(&admin.status().await),
            before,
            "{method} {path} {shown} changed the room"
        );
    }
}

/// What a caller put in the path (or the method) is echoed to say what was wrong, but capped:
/// the first 64 characters and `…`, never thousands.
#[tokio::test]
async fn long_path_segments_are_echoed_capped() {
    let (g, _layer) = memory_gateway().await;
    let admin = Admin::new(&g);
    let long_room = "r".repeat(5000);
    let long_session = "z".repeat(5000);
    let long_method = Method::from_bytes("M".repeat(3000).as_bytes()).unwrap();
    for (method, path, status, echo) in [
        (
            Method::GET,
            format!("/admin/rooms/{long_room}"),
            StatusCode::NOT_FOUND,
            format!("no room \"{}…\" here", "r".repeat(64)),
        ),
        (
            Method::DELETE,
            format!("{}/sessions/{long_session}", room_path()),
            StatusCode::BAD_REQUEST,
            format!("\"{}…\"", "z".repeat(64)),
        ),
        (
            long_method,
            room_path(),
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{}… is not allowed here", "M".repeat(64)),
        ),
    ] {
        let r = admin.send(method, &path, None, b"").await;
        assert_eq!(r.status, status, "{}", r.text());
        let error = r.json()["error"].as_str().unwrap().to_owned();
        let start: String = error.chars().take(200).collect();
        assert!(error.contains(&echo), "{start:?}... lacks {echo:?}");
        assert!(error.len() < 400, "{} bytes: {start:?}...", error.len());
    }
    // Short ones in full, as before.
    let r = admin
        .send(
            Method::DELETE,
            &format!("{}/sessions/xyz", room_path()),
            None,
            b"",
        )
        .await;
    let error = r.json()["error"].as_str().unwrap().to_owned();
    assert!(
        error.contains("32 hex digits") && error.contains("\"xyz\""),
        "{error:?}"
    );
}
