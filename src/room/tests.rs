//! The room as one: what its stages do together (each request reads its cookies once; the
//! fast path answers exactly as the whole dispatch would).

mod cookie_reads {
    use std::time::Duration;

    use http::{header, HeaderValue, Request, Response, StatusCode};
    use tower::{service_fn, Layer, ServiceExt};

    use crate::cookies::steps_so_far;
    use crate::testing::TestRoom;

    /// Sends `req` through the room and says how many times its cookies were read.
    async fn reads(room: &TestRoom, path: &str, method: &str, cookies: &[&HeaderValue]) -> usize {
        let mut req = Request::builder().method(method).uri(path);
        for c in cookies {
            req = req.header(header::COOKIE, (*c).clone());
        }
        let svc = room.layer().layer(service_fn(|_req: Request<()>| async {
            Ok::<_, std::convert::Infallible>(Response::new(String::new()))
        }));
        let before = steps_so_far().1;
        let res = svc.oneshot(req.body(()).unwrap()).await.unwrap();
        assert!(res.status() != StatusCode::INTERNAL_SERVER_ERROR);
        steps_so_far().1 - before
    }

    #[tokio::test(flavor = "current_thread")]
    async fn each_request_reads_its_cookies_once() {
        let room = TestRoom::new("once", 1);
        let (_, inside) = room.admit().await;
        let (_, queued) = room.queue_cookie();
        let (_, stale) = room.token_without_slot();
        let status = "/__waitingroom/once/status";
        let leave = "/__waitingroom/once/leave";
        let cases: [(&str, &str, &str, Vec<&HeaderValue>); 7] = [
            ("first visit", "/", "GET", vec![]),
            ("fresh token", "/", "GET", vec![&inside]),
            ("in line", "/", "GET", vec![&queued]),
            ("status", status, "GET", vec![&queued]),
            ("leave", leave, "POST", vec![&queued]),
            (
                "in line again, headers of its own",
                "/",
                "GET",
                vec![&queued, &queued],
            ),
            ("stale token and place", "/", "GET", vec![&inside, &queued]),
        ];
        for (what, path, method, cookies) in &cases {
            assert_eq!(reads(&room, path, method, cookies).await, 1, "{what}");
        }
        // Past refresh: a heartbeat, then (no slot) an entry, then an answer.
        room.clock().advance(Duration::from_secs(20));
        assert_eq!(reads(&room, "/", "GET", &[&stale]).await, 1, "stale token");
        assert_eq!(reads(&room, "/", "GET", &[&inside]).await, 1, "heartbeat");
    }
}

mod fast_path {
    use std::time::Duration;

    use http::{header, HeaderValue, Request};

    use crate::outcome::{Admission, AdmittedBy};
    use crate::room::visitor::Carried;
    use crate::room::{Next, Room};
    use crate::testing::TestRoom;
    use crate::WaitingRoomLayer;

    fn request(path: &str, cookies: &[&HeaderValue]) -> Request<()> {
        let mut req = Request::builder().uri(path);
        for c in cookies {
            req = req.header(header::COOKIE, (*c).clone());
        }
        req.body(()).unwrap()
    }

    /// What the fast path says of `req`, and what the rest of `classify` says of it.
    fn both(room: &Room, req: &Request<()>) -> (Option<Admission>, Next) {
        let now = room.now_ms();
        let carried = Carried::read(&room.core, req);
        (
            crate::room::fast_path::admit(&room.core, req, &carried, now),
            room.classify_whole(req, &carried, now),
        )
    }

    /// A room, its layer, and a token the room has verified once (so the fast path passes it).
    fn with_a_remembered_token() -> (TestRoom, WaitingRoomLayer, HeaderValue) {
        let test = TestRoom::new("fast", 10);
        let layer = test.layer();
        let (_, token) = test.token_without_slot();
        let _ = both(layer.room(), &request("/", &[&token]));
        assert!(both(layer.room(), &request("/", &[&token])).0.is_some());
        (test, layer, token)
    }

    fn passed(next: Next) -> Option<Admission> {
        match next {
            Next::Pass { admission, .. } => Some(admission),
            _ => None,
        }
    }

    #[test]
    fn a_remembered_fresh_token_passes_with_the_admission_classify_gives() {
        let test = TestRoom::new("fast", 10);
        let layer = test.layer();
        let room = layer.room();
        let (session, token) = test.token_without_slot();
        let req = request("/shop", &[&token]);
        // Never verified on this gateway: not the fast path's to decide; the whole check
        // verifies it (and remembers it).
        let (fast, whole) = both(room, &req);
        assert!(
            fast.is_none(),
            "a token not verified yet goes the whole way"
        );
        let whole = passed(whole).expect("a fresh valid token passes");
        assert_eq!(
            (whole.session(), whole.admitted_by()),
            (session, AdmittedBy::Token)
        );
        // Now remembered: the fast path passes it, with the very same admission.
        let (fast, whole) = both(room, &req);
        assert_eq!(fast, passed(whole));
        assert_eq!(fast.map(|a| a.session()), Some(session));
    }

    #[test]
    fn whatever_it_is_not_sure_of_goes_on_to_the_whole_check() {
        let (test, layer, token) = with_a_remembered_token();
        let room = layer.room();

        // One of the room's endpoints, with the same token.
        let status = "/__waitingroom/fast/status";
        let (fast, whole) = both(room, &request(status, &[&token]));
        assert!(fast.is_none());
        assert!(passed(whole).is_none(), "the status endpoint answers");

        // A value before it that could be a token but is not one: `classify` takes the first
        // that verifies (the genuine one); the fast path looks only at the first.
        let name = room.config().cookies().admission_name();
        let forged = test.token_without_slot().1;
        let forged = forged.to_str().unwrap().replace(&format!("{name}="), "");
        let mut flipped = forged.into_bytes();
        let last = flipped.len() - 1;
        flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
        let forged =
            HeaderValue::from_str(&format!("{name}={}", String::from_utf8(flipped).unwrap()))
                .unwrap();
        let (fast, whole) = both(room, &request("/", &[&forged, &token]));
        assert!(fast.is_none(), "the first value is not remembered");
        assert!(passed(whole).is_some(), "the genuine second one passes");

        // A genuine token not verified here yet, before the remembered one: `classify` lets
        // the first one's session in, so the fast path must not pass the second's.
        let (first, unverified) = test.token_without_slot();
        let (fast, whole) = both(room, &request("/", &[&unverified, &token]));
        assert!(
            fast.is_none(),
            "only the first value is the fast path's to look at"
        );
        assert_eq!(passed(whole).map(|a| a.session()), Some(first));

        // Past `refresh`: a heartbeat is due, which only the whole check asks for.
        test.clock().advance(Duration::from_secs(20));
        let (fast, whole) = both(room, &request("/", &[&token]));
        assert!(fast.is_none());
        assert!(matches!(whole, Next::Ask(_)), "a heartbeat to the store");

        // Expired: nothing passes.
        test.clock().advance(Duration::from_secs(24 * 3_600));
        let (fast, whole) = both(room, &request("/", &[&token]));
        assert!(fast.is_none());
        assert!(passed(whole).is_none());
    }

    #[test]
    fn a_byte_flipped_remembered_token_is_no_token_here() {
        let (_test, layer, token) = with_a_remembered_token();
        let room = layer.room();
        let text = token.as_bytes().to_vec();
        let name_len = room.config().cookies().admission_name().len() + 1;
        for i in name_len..text.len() {
            let mut flipped = text.clone();
            flipped[i] ^= 0x01;
            let Ok(value) = HeaderValue::from_bytes(&flipped) else {
                continue;
            };
            let (fast, whole) = both(room, &request("/", &[&value]));
            assert!(fast.is_none(), "byte {i} flipped passed the fast path");
            assert!(passed(whole).is_none(), "byte {i} flipped passed");
        }
    }

    #[test]
    fn network_binding_always_takes_the_whole_check() {
        let test = TestRoom::with(
            WaitingRoomLayer::builder("bound")
                .capacity(10)
                .bind_tokens_to_network(true),
        );
        let layer = test.layer();
        let room = layer.room();
        let (_, token) = test.token_without_slot();
        for _ in 0..2 {
            assert!(both(room, &request("/", &[&token])).0.is_none());
        }
    }
}
