use std::time::Duration;

use crate::support::*;

#[test]
fn a_visitor_waits_then_reaches_the_python_app() {
    let app = App::start();
    let gw = Gateway::start(&config(&app.url(), &sale_room(1)));
    let mut first = Jar::default();
    let res = visit(gw.addr, "/", &mut first, Duration::from_secs(5));
    assert_eq!(res.status, 200, "{}", res.text());
    assert!(res.text().contains("app page /"), "{}", res.text());
    let mut second = Jar::default();
    let res = visit(gw.addr, "/", &mut second, Duration::ZERO);
    assert_eq!(res.status, 429, "the second waits: {}", res.text());
}
