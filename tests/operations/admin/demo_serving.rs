//! The demo's admin: served at `/admin` with a token, absent without one.

use super::clients::Admin;
use super::{demo, TOKEN};
use crate::common::Http;

use http::{Method, StatusCode};

#[cfg(feature = "serve")]
#[tokio::test]
async fn the_demo_serves_the_admin_only_with_a_token() {
    for with_token in [true, false] {
        let mut args = vec!["--insecure-cookies".to_owned()];
        if with_token {
            args.extend(["--admin-token".to_owned(), TOKEN.to_owned()]);
        }
        let opts = demo::parse_args(args).unwrap().unwrap();
        let layer = demo::build_layer(&opts).unwrap();
        let admin = demo::build_admin(&opts, std::slice::from_ref(&layer), None).unwrap();
        assert_eq!(admin.is_some(), with_token);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let http = Http::new(listener.local_addr().unwrap());
        tokio::spawn(demo::serve_with_admin(
            listener,
            layer,
            admin,
            std::future::pending(),
        ));
        let r = Admin::new(&http)
            .send(Method::GET, "/admin/rooms/demo", None, b"")
            .await;
        if with_token {
            assert_eq!(
                (r.status, r.json()["room"].as_str()),
                (StatusCode::OK, Some("demo"))
            );
            let page = http.send(Method::GET, "/admin/", &[]).await;
            assert!(page.text().contains("<title>Waiting room admin</title>"));
        } else {
            // No admin at all: the path is one more page behind the room.
            assert_eq!(r.status, StatusCode::FOUND, "{}", r.text());
        }
    }
}
