//! The `waiting_room` span of each request: at DEBUG, with the room, the stage and the outcome,
//! and never a cookie's value in any field.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::{header, Request, Response, StatusCode};
use tower::{Layer as _, ServiceExt};
use tower_waiting_room::testing::TestRoom;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// A span's name and its fields as recorded so far.
type Seen = (String, BTreeMap<String, String>);

/// Every span, by span id.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<BTreeMap<u64, Seen>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let name = attrs.metadata().name().to_owned();
        self.0.lock().unwrap().insert(id.into_u64(), (name, fields));
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some((_, fields)) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Fields(fields));
        }
    }
}

impl Spans {
    fn rooms(&self) -> Vec<BTreeMap<String, String>> {
        let spans = self.0.lock().unwrap();
        spans
            .values()
            .filter(|(name, _)| name == "waiting_room")
            .map(|(_, fields)| fields.clone())
            .collect()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn each_request_has_a_span_with_room_stage_and_outcome_and_no_secret() {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    // The family's other tests run in this process, on other threads.
    crate::common::tracing_asks_every_subscriber();
    let _guard = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();

    let room = TestRoom::new("traced", 1);
    let svc = room
        .layer()
        .layer(tower::service_fn(|_req: Request<()>| async {
            tracing::info!("the app's own event");
            Ok::<_, std::convert::Infallible>(Response::new(String::new()))
        }));
    let send = |cookie: &http::HeaderValue| {
        let req = Request::get("/")
            .header(header::COOKIE, cookie.clone())
            .body(())
            .unwrap();
        svc.clone().oneshot(req)
    };
    let (_, inside) = room.admit().await;
    let (_, queued) = room.queue_cookie();
    assert_eq!(send(&inside).await.unwrap().status(), StatusCode::OK);
    assert_eq!(
        send(&queued).await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );

    let seen = spans.rooms();
    let with = |stage: &str, outcome: &str| {
        seen.iter().any(|f| {
            f.get("room").map(String::as_str) == Some("traced")
                && f.get("stage").map(String::as_str) == Some(stage)
                && f.get("outcome").map(String::as_str) == Some(outcome)
        })
    };
    assert!(with("fast_path", "passed"), "{seen:?}");
    assert!(with("store", "waiting"), "{seen:?}");
    assert_eq!(seen.len(), 2, "one span per request: {seen:?}");

    // No field holds a cookie's value, nor a part of it past the name.
    let secrets: Vec<String> = [&inside, &queued]
        .iter()
        .map(|c| c.to_str().unwrap().split_once('=').unwrap().1.to_owned())
        .collect();
    for fields in &seen {
        for value in fields.values() {
            for secret in &secrets {
                assert!(!value.contains(secret.as_str()), "{value} holds a cookie");
                for part in secret.split('.').filter(|p| p.len() > 8) {
                    assert!(!value.contains(part), "{value} holds part of a cookie");
                }
            }
        }
    }
}
