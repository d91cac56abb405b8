//! The gateway in front of Debian's nginx serving static pages (an app in no language at all):
//! the room works in front of it (first visit, waiting, admission), and what nginx serves
//! arrives exactly as nginx serves it: the bytes, the validators (ETag, Last-Modified) and what
//! nginx does with them (304), HEAD, ranges, and nginx's own 404.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::*;

const NGINX: &str = "/usr/sbin/nginx";
const LIMIT: Duration = Duration::from_secs(5);

/// nginx on a free port of loopback serving `www`, run as whatever user the tests run as (every
/// path it writes is in its own directory). Stopped when dropped.
struct Nginx {
    addr: std::net::SocketAddr,
    dir: PathBuf,
    _proc: Proc,
}

impl Nginx {
    fn start(name: &str, www: &Path) -> Nginx {
        assert!(
            Path::new(NGINX).exists(),
            "{NGINX} is missing: apt-get install nginx (scripts/test installs it)"
        );
        let dir = scratch(&format!("nginx-{name}"));
        for sub in ["body", "proxy", "fastcgi", "uwsgi", "scgi"] {
            std::fs::create_dir_all(dir.join("tmp").join(sub)).unwrap();
        }
        let port = free_port();
        let d = dir.display();
        let conf = format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
             error_log {d}/error.log warn;\n\
             events {{ worker_connections 64; }}\n\
             http {{\n\
               access_log {d}/access.log;\n\
               client_body_temp_path {d}/tmp/body;\n\
               proxy_temp_path {d}/tmp/proxy;\n\
               fastcgi_temp_path {d}/tmp/fastcgi;\n\
               uwsgi_temp_path {d}/tmp/uwsgi;\n\
               scgi_temp_path {d}/tmp/scgi;\n\
               types {{ text/html html; text/css css; application/octet-stream bin; }}\n\
               default_type application/octet-stream;\n\
               server {{\n\
                 listen 127.0.0.1:{port};\n\
                 root {www};\n\
               }}\n\
             }}\n",
            www = www.display()
        );
        std::fs::write(dir.join("nginx.conf"), conf).unwrap();
        let child = Command::new(NGINX)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-e")
            .arg(dir.join("error.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx starts");
        let mut nginx = Nginx {
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            dir,
            _proc: Proc { child },
        };
        let up = eventually(LIMIT, || {
            if let Ok(Some(status)) = nginx._proc.child.try_wait() {
                panic!("nginx exited ({status}): {}", nginx.error_log());
            }
            std::net::TcpStream::connect(nginx.addr).is_ok()
        });
        assert!(up, "nginx did not listen: {}", nginx.error_log());
        nginx
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }
}

/// A site: an HTML page, a stylesheet, and 200 KB of every byte value (binary, past any
/// buffer of one read).
fn site(name: &str) -> PathBuf {
    let www = scratch(&format!("www-{name}"));
    let page = format!(
        "<!doctype html>\n<html><head><title>static shop</title>\
         <link rel=\"stylesheet\" href=\"/site.css\"></head>\n<body>{}</body></html>\n",
        "<p>A page nginx serves as it is, byte for byte.</p>\n".repeat(200)
    );
    std::fs::write(www.join("index.html"), page).unwrap();
    std::fs::write(www.join("site.css"), "body { font-family: serif }\n").unwrap();
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 256) as u8).collect();
    std::fs::write(www.join("data.bin"), data).unwrap();
    www
}

fn gateway_for(nginx: &Nginx, capacity: u32) -> Gateway {
    Gateway::start(&config(&nginx.url(), &sale_room(capacity)))
}

#[test]
fn nginx_behind_the_room_first_visit_waiting_and_admission() {
    let www = site("room");
    let nginx = Nginx::start("room", &www);
    let gw = gateway_for(&nginx, 1);
    let page = std::fs::read(www.join("index.html")).unwrap();

    let mut first = Jar::default();
    let res = get(gw.addr, "/index.html", &mut first);
    assert_eq!(res.status, 302, "{}", res.text());
    assert!(res.header("set-cookie").unwrap().starts_with("wr_sale_q="));
    assert!(
        res.header("server").is_none_or(|s| !s.contains("nginx")),
        "the redirect is the room's"
    );
    let res = visit(gw.addr, "/index.html", &mut first, LIMIT);
    assert_eq!(res.status, 200, "{}", res.text());
    assert!(res.body == page, "not the file's bytes");
    assert!(res.header("server").unwrap_or("").starts_with("nginx"));

    let mut second = Jar::default();
    let res = visit(gw.addr, "/index.html", &mut second, Duration::ZERO);
    assert_eq!(res.status, 429, "{}", res.text());
    assert!(res.text().contains("<html"));
    let res = request(
        gw.addr,
        "GET",
        "/index.html",
        &[("accept", "application/json")],
        b"",
        &mut second,
    );
    assert_eq!(res.json()["position"], 1, "{}", res.text());

    let res = request(
        gw.addr,
        "POST",
        "/__waitingroom/sale/leave",
        &[("accept", "application/json")],
        b"",
        &mut first,
    );
    assert_eq!(res.json()["state"], "left", "{}", res.text());
    let res = visit(gw.addr, "/site.css", &mut second, LIMIT);
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(res.text(), "body { font-family: serif }\n");
    assert_eq!(res.header("content-type"), Some("text/css"));
    let log = std::fs::read_to_string(nginx.dir.join("access.log")).unwrap();
    assert_eq!(
        log.lines().count(),
        2,
        "nginx served the two admitted requests only:\n{log}"
    );
}

#[test]
fn nginx_answers_pass_byte_for_byte_with_validators_head_ranges_and_404() {
    let www = site("bytes");
    let nginx = Nginx::start("bytes", &www);
    let gw = gateway_for(&nginx, 10);
    let mut jar = admitted(gw.addr, "/", LIMIT);
    let gzip = [("accept-encoding", "gzip, br")];

    for (path, file) in [
        ("/index.html", "index.html"),
        ("/data.bin", "data.bin"),
        ("/", "index.html"),
    ] {
        let through = request(gw.addr, "GET", path, &gzip, b"", &mut jar);
        let direct = request(nginx.addr, "GET", path, &gzip, b"", &mut Jar::default());
        assert_eq!(through.status, 200, "{path}");
        assert_eq!(direct.status, 200, "{path}");
        let bytes = std::fs::read(www.join(file)).unwrap();
        assert!(through.body == bytes, "{path}: not the file's bytes");
        assert!(through.body == direct.body, "{path}: not nginx's bytes");
        for name in ["etag", "last-modified", "content-length", "content-type"] {
            assert!(
                direct.header(name).is_some(),
                "{path}: nginx sent no {name}"
            );
            assert_eq!(through.header(name), direct.header(name), "{path}: {name}");
        }
        assert!(
            through.header("content-encoding").is_none(),
            "{path}: the gateway compressed nginx's answer"
        );
    }

    // nginx's validators work through the gateway: nginx itself answers 304.
    let direct = get(nginx.addr, "/index.html", &mut Jar::default());
    let etag = direct.header("etag").unwrap().to_owned();
    let modified = direct.header("last-modified").unwrap().to_owned();
    for (name, value) in [("if-none-match", &etag), ("if-modified-since", &modified)] {
        let res = request(
            gw.addr,
            "GET",
            "/index.html",
            &[(name, value)],
            b"",
            &mut jar,
        );
        assert_eq!(res.status, 304, "{name}: {}", res.text());
        assert!(res.body.is_empty());
        assert_eq!(res.header("etag"), Some(etag.as_str()));
    }

    // A range, as nginx cuts it.
    let res = request(
        gw.addr,
        "GET",
        "/data.bin",
        &[("range", "bytes=1000-1999")],
        b"",
        &mut jar,
    );
    assert_eq!(res.status, 206, "{}", res.text());
    let data = std::fs::read(www.join("data.bin")).unwrap();
    assert!(res.body == data[1000..2000], "not the range's bytes");
    assert_eq!(res.header("content-range"), Some("bytes 1000-1999/200000"));

    // HEAD: nginx's head, no body.
    let cookies: Vec<String> = jar.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let raw = format!(
        "HEAD /index.html HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nCookie: {}\r\n\r\n",
        gw.addr,
        cookies.join("; ")
    );
    let mut conn = open_raw(gw.addr, raw.as_bytes(), LIMIT);
    let head = read_head(&mut conn).unwrap();
    assert_eq!(head.status, 200);
    let size = std::fs::metadata(www.join("index.html")).unwrap().len();
    assert_eq!(
        head.header("content-length"),
        Some(size.to_string().as_str())
    );
    assert_eq!(head.header("etag"), Some(etag.as_str()));
    assert_eq!(
        until_closed(&mut conn).unwrap(),
        b"",
        "a HEAD answer has no body"
    );

    // nginx's 404, passed as nginx wrote it (not the gateway's page).
    let through = get(gw.addr, "/missing.html", &mut jar);
    let direct = get(nginx.addr, "/missing.html", &mut Jar::default());
    assert_eq!(through.status, 404);
    assert!(through.text().contains("nginx"), "{}", through.text());
    assert!(through.body == direct.body);

    let log = std::fs::read_to_string(nginx.dir.join("access.log")).unwrap();
    assert!(
        log.contains("\"HEAD /index.html HTTP/1.1\" 200"),
        "the HEAD reached nginx as a HEAD:\n{log}"
    );
}
