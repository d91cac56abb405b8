//! The file's refusals, each naming its line.

use std::path::Path;

use super::{Config, Overrides};

/// The file names a variable; reading it is the room builder's (tests/ run that).
const SECRET_ENV: &str = "WAITING_ROOM_SECRET";

fn parse(text: &str) -> Result<Config, super::FileError> {
    Config::parse(text, Path::new("gw.toml"), &Overrides::default())
}

fn refused(text: &str) -> (Option<usize>, String) {
    let e = parse(text).expect_err("the file is refused");
    assert!(e.to_string().starts_with("gw.toml"), "{e}");
    (e.line, e.message)
}

#[test]
fn a_minimal_file_loads_with_the_defaults() {
    let c = parse(&format!(
        "upstream = \"http://127.0.0.1:8000\"\n[[rooms]]\nroom = \"sale\"\ncapacity = 5\nsecret_env = \"{SECRET_ENV}\"\n"
    ))
    .unwrap();
    assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(c.upstreams.len(), 1);
    assert_eq!(c.upstreams[0].to_string(), "http://127.0.0.1:8000");
    assert_eq!(c.rooms.len(), 1);
    assert!(c.rooms[0].is_default());
    assert_eq!(c.rooms[0].line, 2);
    assert_eq!(c.paths.health, "/__gateway/health");
    assert!(c.admin_token.is_none());
}

#[test]
fn an_unknown_key_is_refused_at_its_line_at_top_and_in_a_room() {
    let (line, msg) = refused("upstream = \"http://a:1\"\nlisten_addr = \"x\"\n");
    assert_eq!(line, Some(2));
    assert!(msg.contains("listen_addr"), "{msg}");
    let (line, msg) =
        refused("upstream = \"http://a:1\"\n\n[[rooms]]\nroom = \"sale\"\ncapcity = 3\n");
    assert_eq!(line, Some(5), "{msg}");
    assert!(msg.contains("capcity"), "{msg}");
    let (line, msg) = refused("upstream = \"http://a:1\"\n[limits]\nbody_timout = \"3s\"\n");
    assert_eq!(line, Some(3), "{msg}");
}

#[test]
fn a_bad_url_or_address_is_refused_at_its_line() {
    for (text, line, needle) in [
        ("upstream = \"not a url\"\n", 1, "not a URL"),
        ("\nupstream = \"https://a:443\"\n", 2, "https"),
        ("upstream = \"http://a:1/app\"\n", 1, "path"),
        ("upstreams = [\"http://a:1\",\n  \"ftp://b\"]\n", 2, "http"),
        (
            "upstream = \"http://a:1\"\nlisten = \"8080\"\n",
            2,
            "listen",
        ),
        (
            "upstream = \"http://a:1\"\nredis = \"mongodb://x\"\n",
            2,
            "redis",
        ),
        (
            "upstream = \"http://a:1\"\ntrusted_proxies = [\"10.0.0.0/33\"]\n",
            2,
            "trusted_proxies",
        ),
    ] {
        let (got, msg) = refused(text);
        assert_eq!(got, Some(line), "{text}: {msg}");
        assert!(msg.contains(needle), "{text}: {msg}");
    }
}

#[test]
fn no_upstream_or_two_default_rooms_are_refused() {
    let (line, msg) = refused("listen = \"127.0.0.1:1\"\n");
    assert_eq!(line, None);
    assert!(msg.contains("no upstream"), "{msg}");
    let (line, msg) =
        refused("upstream = \"http://a:1\"\n[[rooms]]\nroom = \"a\"\n[[rooms]]\nroom = \"b\"\n");
    assert_eq!(line, Some(4), "{msg}");
}

#[test]
fn the_command_line_takes_the_place_of_the_file() {
    let overrides = Overrides {
        listen: Some("127.0.0.1:0".into()),
        upstream: Some("http://127.0.0.1:9".into()),
    };
    let c = Config::parse(
        "listen = \"0.0.0.0:80\"\nupstreams = [\"http://a:1\", \"http://b:2\"]\n",
        Path::new("gw.toml"),
        &overrides,
    )
    .unwrap();
    assert_eq!(c.listen.port(), 0);
    assert_eq!(c.upstreams.len(), 1);
    let bad = Overrides {
        upstream: Some("nope".into()),
        ..Overrides::default()
    };
    let e = Config::parse("", Path::new("gw.toml"), &bad).unwrap_err();
    assert!(e.to_string().contains("--upstream"), "{e}");
}

#[test]
fn an_admin_token_comes_from_the_environment_and_is_long_enough() {
    let (line, msg) = refused(
        "upstream = \"http://a:1\"\n[admin]\ntoken_env = \"TWR_GATEWAY_TEST_UNSET_VARIABLE\"\n",
    );
    assert_eq!(line, Some(2), "{msg}");
    assert!(msg.contains("TWR_GATEWAY_TEST_UNSET_VARIABLE"), "{msg}");
    let dir = std::env::temp_dir().join(format!("gw-token-{}", std::process::id()));
    std::fs::write(&dir, "short\n").unwrap();
    let (line, msg) = refused(&format!(
        "upstream = \"http://a:1\"\n[admin]\ntoken_file = \"{}\"\n",
        dir.display()
    ));
    assert_eq!(line, Some(2));
    assert!(msg.contains("32"), "{msg}");
    assert!(!msg.contains("short"), "the token is never shown: {msg}");
    std::fs::write(&dir, "a-token-of-forty-characters-0123456789ab\n").unwrap();
    let c = parse(&format!(
        "upstream = \"http://a:1\"\n[admin]\ntoken_file = \"{}\"\n",
        dir.display()
    ))
    .unwrap();
    let token = c.admin_token.unwrap();
    assert_eq!(token.0.len(), 40);
    assert!(!format!("{token:?}").contains("forty"));
    std::fs::remove_file(&dir).ok();
}

#[test]
fn limits_are_read_and_checked() {
    let c = parse(
        "upstream = \"http://a:1\"\n[limits]\nupstream_timeout = \"2s\"\nmax_body_bytes = 1024\nmax_connections = 7\n",
    )
    .unwrap();
    assert_eq!(c.limits.upstream_timeout.as_secs(), 2);
    assert_eq!(c.limits.max_body_bytes, 1024);
    assert_eq!(c.limits.serve.get_max_connections(), 7);
    let (line, msg) = refused("upstream = \"http://a:1\"\n[limits]\nmax_connections = 0\n");
    assert_eq!(line, Some(3), "{msg}");
    let (line, msg) = refused(
        "upstream = \"http://a:1\"\n[limits]\nupstream_timeout = \"90s\"\nrequest_timeout = \"60s\"\n",
    );
    assert!(msg.contains("upstream_timeout"), "{msg}");
    assert_eq!(line, Some(3), "{msg}");
    let (line, msg) = refused("upstream = \"http://a:1\"\n[limits]\n\nrequest_timeout = \"10s\"\n");
    assert!(msg.contains("upstream_timeout (30s)"), "{msg}");
    assert_eq!(line, Some(4), "the one of the two the file gives: {msg}");
    let (line, msg) = refused("upstream = \"http://a:1\"\n[limits]\ngrace = \"soon\"\n");
    assert_eq!(line, Some(3), "{msg}");
    // The idle connections' timeout: 60 s unless said, never zero.
    assert_eq!(c.limits.upstream_idle_timeout.as_secs(), 60);
    let c = parse("upstream = \"http://a:1\"\n[limits]\nupstream_idle_timeout = \"4s\"\n").unwrap();
    assert_eq!(c.limits.upstream_idle_timeout.as_secs(), 4);
    let (line, msg) =
        refused("upstream = \"http://a:1\"\n[limits]\nupstream_idle_timeout = \"0s\"\n");
    assert!(msg.contains("upstream_idle_timeout"), "{msg}");
    assert_eq!(line, Some(3), "{msg}");
    // The send timeout: nginx's 60 s unless said, never zero.
    assert_eq!(c.limits.serve.get_send_timeout().as_secs(), 60);
    let c = parse("upstream = \"http://a:1\"\n[limits]\nsend_timeout = \"15s\"\n").unwrap();
    assert_eq!(c.limits.serve.get_send_timeout().as_secs(), 15);
    let (line, msg) = refused("upstream = \"http://a:1\"\n[limits]\nsend_timeout = \"0s\"\n");
    assert!(msg.contains("send_timeout"), "{msg}");
    assert_eq!(line, Some(3), "{msg}");
    // The cap per client address: off unless said; 0 is off too.
    assert_eq!(c.limits.serve.get_max_connections_per_ip(), None);
    let c = parse("upstream = \"http://a:1\"\n[limits]\nmax_connections_per_ip = 32\n").unwrap();
    assert_eq!(c.limits.serve.get_max_connections_per_ip(), Some(32));
    let c = parse("upstream = \"http://a:1\"\n[limits]\nmax_connections_per_ip = 0\n").unwrap();
    assert_eq!(c.limits.serve.get_max_connections_per_ip(), None);
}

#[test]
fn routes_are_read_and_bad_ones_named() {
    let c = parse(&format!(
        "upstream = \"http://a:1\"\n[[rooms]]\nroom = \"shop\"\nsecret_env = \"{SECRET_ENV}\"\npaths = [\"/shop\"]\nhosts = [\"shop.example\"]\ngates = [\"POST /checkout\", \"/api/*\", \"GET,HEAD /x\", \"GET /y\"]\nbypass = [\"/static\"]\n"
    ))
    .unwrap();
    let r = &c.rooms[0];
    assert!(!r.is_default());
    assert_eq!(r.paths, ["/shop"]);
    assert_eq!(r.gates.len(), 4);
    assert_eq!(r.gates[0].0, [http::Method::POST]);
    assert!(r.gates[1].0.is_empty());
    assert_eq!(r.gates[2].0, [http::Method::GET, http::Method::HEAD]);
    // `GET` alone brings `HEAD`: a gate is never narrower than it reads.
    assert_eq!(r.gates[3].0, [http::Method::GET, http::Method::HEAD]);
    let (line, msg) = refused(
        "upstream = \"http://a:1\"\n[[rooms]]\nroom = \"shop\"\ngates = [\"post /checkout\"]\n",
    );
    assert_eq!(line, Some(4), "{msg}");
    let (line, msg) =
        refused("upstream = \"http://a:1\"\n[[rooms]]\nroom = \"shop\"\n\nbypass = [\"static\"]\n");
    assert_eq!(line, Some(5), "{msg}");
    // A query or a fragment is never in a request's path: such a gate, path or bypass would
    // never match (a gate so written left its route open).
    for (key, value) in [
        ("gates", "GET /checkout?x=1"),
        ("gates", "/pay#now"),
        ("paths", "/shop?x"),
        ("bypass", "/static/*"),
        ("bypass", "/img#a"),
    ] {
        let (line, msg) = refused(&format!(
            "upstream = \"http://a:1\"\n[[rooms]]\nroom = \"shop\"\n{key} = [\"{value}\"]\n"
        ));
        assert_eq!(line, Some(4), "{key} = {value}: {msg}");
        assert!(msg.contains(key), "{msg}");
    }
}

#[test]
fn an_unknown_room_key_is_told_with_the_keys_a_room_table_takes() {
    let (line, msg) =
        refused("upstream = \"http://a:1\"\n[[rooms]]\nroom = \"shop\"\ncapcity = 5\n");
    assert_eq!(line, Some(4), "{msg}");
    assert!(msg.contains("unknown field `capcity`"), "{msg}");
    for key in [
        "`capacity`",
        "`secret_env`",
        "`paths`",
        "`gates`",
        "`bypass`",
    ] {
        assert!(msg.contains(key), "{key} missing: {msg}");
    }
    for key in ["`secret`", "`client_ip_header`"] {
        assert!(
            !msg.contains(key),
            "{key}, which a room refuses, offered: {msg}"
        );
    }
}

#[test]
fn a_metrics_token_is_read_as_the_admins_is() {
    let (line, msg) = refused(
        "upstream = \"http://a:1\"\n\n[metrics]\ntoken_env = \"TWR_GATEWAY_TEST_UNSET_TOKEN\"\n",
    );
    assert_eq!(line, Some(3), "{msg}");
    assert!(
        msg.starts_with("metrics: the environment variable"),
        "{msg}"
    );
    let (line, msg) = refused("upstream = \"http://a:1\"\n[metrics]\ntoken = \"abc\"\n");
    assert_eq!(line, Some(3), "{msg}");
    assert!(msg.contains("unknown field `token`"), "{msg}");
    let c = parse("upstream = \"http://a:1\"\n").unwrap();
    assert!(c.metrics_token.is_none(), "no token unless asked");
}

#[test]
fn a_room_cannot_name_its_own_client_ip_header() {
    let (line, msg) = refused(
        "upstream = \"http://a:1\"\n[[rooms]]\nroom = \"shop\"\nclient_ip_header = \"x-real-ip\"\n",
    );
    assert_eq!(line, Some(4), "{msg}");
    assert!(msg.contains("trusted_proxies"), "{msg}");
}

#[test]
fn a_redis_url_with_a_password_can_come_from_the_environment() {
    let (line, msg) =
        refused("upstream = \"http://a:1\"\n\nredis_env = \"TWR_GATEWAY_TEST_UNSET_REDIS\"\n");
    assert_eq!(line, Some(3), "{msg}");
    assert!(msg.contains("TWR_GATEWAY_TEST_UNSET_REDIS"), "{msg}");
    let (line, _) =
        refused("upstream = \"http://a:1\"\nredis = \"redis://a/\"\nredis_env = \"PATH\"\n");
    assert_eq!(line, Some(3));
    // A variable every test process has, holding what is not a Redis URL: refused at the key.
    let (line, msg) = refused("upstream = \"http://a:1\"\nredis_env = \"PATH\"\n");
    assert_eq!(line, Some(2), "{msg}");
    assert!(msg.starts_with("redis:"), "{msg}");
}

#[test]
fn a_redis_cluster_a_key_prefix_and_a_deadline_are_read() {
    use std::time::Duration;

    use super::RedisNodes;

    let c = parse(
        "upstream = \"http://a:1\"\nredis_cluster = [\"redis://10.0.0.1:7000\", \"redis://10.0.0.2:7001\"]\n\
         redis_prefix = \"shop\"\nredis_timeout = \"400ms\"\n",
    )
    .unwrap();
    let redis = c.redis.expect("a redis");
    assert_eq!(
        redis.nodes,
        RedisNodes::Cluster(vec![
            "redis://10.0.0.1:7000".to_owned(),
            "redis://10.0.0.2:7001".to_owned()
        ])
    );
    assert_eq!(redis.prefix.as_deref(), Some("shop"));
    assert_eq!(redis.timeout, Some(Duration::from_millis(400)));
    // One URL, with neither: the store's defaults.
    let c = parse("upstream = \"http://a:1\"\nredis = \"redis://a:6379/\"\n").unwrap();
    let redis = c.redis.expect("a redis");
    assert_eq!(redis.nodes, RedisNodes::Url("redis://a:6379/".to_owned()));
    assert_eq!((redis.prefix, redis.timeout), (None, None));
}

#[test]
fn the_redis_settings_refuse_what_they_cannot_mean_at_its_line() {
    for (text, line, needle) in [
        // Two places for the lines: which one?
        (
            "upstream = \"http://a:1\"\nredis = \"redis://a/\"\n\nredis_cluster = [\"redis://b:1\"]\n",
            4,
            "`redis` and `redis_cluster` both given",
        ),
        (
            "upstream = \"http://a:1\"\nredis_cluster = []\n",
            2,
            "no node",
        ),
        (
            "upstream = \"http://a:1\"\nredis_cluster = [\"redis://a:1\",\n  \"mongodb://b\"]\n",
            3,
            "redis_cluster:",
        ),
        (
            "upstream = \"http://a:1\"\nredis_cluster = [\"redis+sentinel://s:26379/mymaster\"]\n",
            2,
            "Sentinel goes in `redis`",
        ),
        // Settings with no Redis: a mistake, not a no-op.
        (
            "upstream = \"http://a:1\"\n\nredis_prefix = \"shop\"\n",
            3,
            "no Redis to apply it to",
        ),
        (
            "upstream = \"http://a:1\"\nredis_timeout = \"1s\"\n",
            2,
            "no Redis to apply it to",
        ),
        (
            "upstream = \"http://a:1\"\nredis = \"redis://a/\"\nredis_prefix = \"{shop}\"\n",
            3,
            "braces",
        ),
        (
            "upstream = \"http://a:1\"\nredis = \"redis://a/\"\nredis_prefix = \"\"\n",
            3,
            "redis_prefix",
        ),
        (
            "upstream = \"http://a:1\"\nredis = \"redis://a/\"\nredis_timeout = \"0s\"\n",
            3,
            "longer than zero",
        ),
        (
            "upstream = \"http://a:1\"\nredis = \"redis://a/\"\nredis_timeout = \"soon\"\n",
            3,
            "not a duration",
        ),
        (
            "upstream = \"http://a:1\"\nredis_cluster_env = \"TWR_GATEWAY_TEST_UNSET_NODES\"\n",
            2,
            "TWR_GATEWAY_TEST_UNSET_NODES",
        ),
    ] {
        let (got, msg) = refused(text);
        assert_eq!(got, Some(line), "{text}: {msg}");
        assert!(msg.contains(needle), "{text}: {msg}");
    }
}

#[test]
fn the_redis_settings_show_no_url_in_debug() {
    let c = parse(
        "upstream = \"http://a:1\"\nredis = \"redis://:hunter2-password@a:6379/\"\nredis_prefix = \"shop\"\n",
    )
    .unwrap();
    let shown = format!("{:?}", c.redis.as_ref().expect("a redis"));
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("shop"), "{shown}");
    let shown = format!("{c:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
}

#[test]
fn no_redis_password_reaches_an_error() {
    for text in [
        // A list's key given a string: the TOML error must not quote it.
        "upstream = \"http://a:1\"\nredis_cluster = \"redis://:hunter2@h:7000\"\n",
        // A socket URL's password is a query parameter.
        "upstream = \"http://a:1\"\nredis = \"unix:///run/r.sock?pass=hunter2&db=x\"\n",
        // Nodes that cannot be one cluster (different passwords).
        "upstream = \"http://a:1\"\nredis_cluster = [\"redis://:hunter2@a:1\", \"redis://:other@b:2\"]\n",
    ] {
        let (line, msg) = refused(text);
        assert_eq!(line, Some(2), "{text}: {msg}");
        assert!(!msg.contains("hunter2"), "{text}: {msg}");
    }
}

#[test]
fn a_cluster_is_checked_as_a_whole_and_its_variable_split_on_any_space() {
    // A socket among the nodes, or nodes with different passwords: refused at the key.
    for nodes in [
        "[\"redis://a:1\", \"redis+unix:///run/r.sock\"]",
        "[\"redis://:x@a:1\", \"redis://:y@b:2\"]",
    ] {
        let (line, msg) = refused(&format!(
            "upstream = \"http://a:1\"\n\nredis_cluster = {nodes}\n"
        ));
        assert_eq!(line, Some(3), "{nodes}: {msg}");
        assert!(msg.starts_with("redis_cluster:"), "{msg}");
    }
    // The variable's nodes: commas, spaces, tabs and a secret file's newline between them.
    let var = "TWR_GATEWAY_TEST_CLUSTER_NODES";
    std::env::set_var(var, "redis://a:7000,\tredis://b:7001\nredis://c:7002 \n");
    let c = parse(&format!(
        "upstream = \"http://a:1\"\nredis_cluster_env = \"{var}\"\n"
    ))
    .unwrap();
    assert_eq!(
        c.redis.expect("a redis").nodes,
        super::RedisNodes::Cluster(
            ["redis://a:7000", "redis://b:7001", "redis://c:7002"]
                .map(String::from)
                .to_vec()
        )
    );
}

#[test]
fn a_gateway_path_of_slashes_only_is_refused_at_its_line() {
    for (key, path) in [("admin", "//"), ("health", "///"), ("metrics", "//")] {
        let (line, message) = refused(&format!(
            "upstream = \"http://127.0.0.1:8000\"\n[paths]\n{key} = \"{path}\"\n"
        ));
        assert_eq!(line, Some(3), "{key}: {message}");
        assert!(message.contains(&format!("paths.{key}")), "{message}");
    }
}

#[test]
fn a_value_toml_refuses_is_named_by_its_key() {
    let (line, message) =
        refused("upstream = \"http://127.0.0.1:8000\"\n[limits]\ngrace = \"10x\"\n");
    assert_eq!(line, Some(3), "{message}");
    assert!(message.starts_with("limits.grace: "), "{message}");
    assert!(message.contains("not a duration"), "{message}");
}

/// A value written where its variable's name goes (a URL with its password, a token) is not
/// repeated in the error, nor is an upstream's password; an upstream's port must be one a
/// connection can use, with a host before it, and nothing after it.
#[test]
fn errors_never_repeat_a_password_and_bad_upstreams_are_refused() {
    let secret = "hunter2hunter2";
    for text in [
        format!("upstream = \"http://a:1\"\nredis_env = \"redis://:{secret}@10.0.0.1:6379\"\n"),
        format!("upstream = \"http://user:{secret}@127.0.0.1:8000\"\n"),
        format!(
            "upstream = \"http://a:1\"\n[admin]\ntoken_env = \"{secret}-{secret}-{secret}!\"\n"
        ),
    ] {
        let (line, msg) = refused(&text);
        assert!(line.is_some(), "{msg}");
        assert!(!msg.contains(secret), "a password repeated: {msg}");
    }
    for upstream in [
        "http://127.0.0.1:99999",
        "http://127.0.0.1:0",
        "http://:8000",
        "http://127.0.0.1:8000#x",
    ] {
        let (line, msg) = refused(&format!("upstream = \"{upstream}\"\n"));
        assert_eq!(line, Some(1), "{upstream}: {msg}");
    }
    assert!(parse("upstream = \"http://127.0.0.1:8000/\"\n").is_ok());
}
