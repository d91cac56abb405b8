//! Redis URLs: checked before the client library sees them, so that a mistake is named (the
//! scheme, a missing `//`, a port out of range…) next to the URL, with its password removed.
//!
//! redis-rs answers every one of these with the same `Redis URL did not parse -
//! InvalidClientConfig`, which says neither which URL nor what is wrong with it.

/// The schemes of a single node, as redis-rs takes them.
const NODE_SCHEMES: [&str; 7] = [
    "redis",
    "rediss",
    "valkey",
    "valkeys",
    "redis+unix",
    "valkey+unix",
    "unix",
];
/// The scheme of a primary found through Redis Sentinel.
pub(crate) const SENTINEL_SCHEME: &str = "redis+sentinel";
/// The port of a sentinel when the URL gives none.
const SENTINEL_PORT: u16 = 26379;

/// Where a URL points.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// One node (or a cluster node): the URL is for redis-rs as it is.
    Node,
    /// The primary of `service`, as the sentinels at `sentinels` (`redis://host:port`) say.
    Sentinel(SentinelTarget),
}

/// A `redis+sentinel://` URL, taken apart.
#[derive(PartialEq, Eq)]
pub(crate) struct SentinelTarget {
    pub(crate) sentinels: Vec<String>,
    pub(crate) service: String,
    pub(crate) db: i64,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
}

impl std::fmt::Debug for SentinelTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelTarget")
            .field("sentinels", &self.sentinels)
            .field("service", &self.service)
            .field("db", &self.db)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// `url` with the password (or a user-only credential) replaced by `***`, and so the value of
/// a `pass` or `password` query parameter (a socket URL's way to give one); also for URLs that
/// do not parse, so that an error message can show them.
pub(crate) fn redact(url: &str) -> String {
    match url.split_once('?') {
        Some((base, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _))
                        if key.eq_ignore_ascii_case("pass")
                            || key.eq_ignore_ascii_case("password") =>
                    {
                        format!("{key}=***")
                    }
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{}?{}", redact_userinfo(base), query.join("&"))
        }
        None => redact_userinfo(url),
    }
}

/// `url`'s credentials before its host replaced by `***`.
fn redact_userinfo(url: &str) -> String {
    // The credentials end at the last '@' (a password may contain '@', a host may not).
    let Some(at) = url.rfind('@') else {
        return url.to_owned();
    };
    let start = match (url.find("://"), url.find("//")) {
        (Some(i), _) => i + 3,
        (None, Some(i)) if i < at => i + 2,
        _ => url.find(':').filter(|&i| i < at).map_or(0, |i| i + 1),
    };
    if start > at {
        return url.to_owned();
    }
    let userinfo = &url[start..at];
    let hidden = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:***"),
        // `redis://secret@host`: some clients take a lone credential as the password.
        None => "***".to_owned(),
    };
    format!("{}{hidden}{}", &url[..start], &url[at..])
}

/// Checks `url` and says where it points; the error names what is wrong (without the URL).
pub(crate) fn parse(url: &str) -> Result<Target, String> {
    let known = || format!("{}, {SENTINEL_SCHEME}", NODE_SCHEMES.join(", "));
    let Some((scheme, rest)) = url.split_once(':').filter(|(s, _)| is_scheme(s)) else {
        if let Some(s) = NODE_SCHEMES
            .iter()
            .chain([&SENTINEL_SCHEME])
            .find(|s| url.starts_with(&format!("{s}//")))
        {
            return Err(format!(
                "missing `:` after the scheme: `{s}://…`, not `{s}//…`"
            ));
        }
        return Err(format!(
            "no scheme: a Redis URL starts with one of {}, then `://`",
            known()
        ));
    };
    let scheme = scheme.to_ascii_lowercase();
    let sentinel = scheme == SENTINEL_SCHEME;
    if !sentinel && !NODE_SCHEMES.contains(&scheme.as_str()) {
        return Err(format!(
            "scheme `{scheme}` is not a Redis scheme (one of {})",
            known()
        ));
    }
    let Some(rest) = rest.strip_prefix("//") else {
        return Err(format!("missing `//` after `{scheme}:`"));
    };
    if scheme.ends_with("unix") {
        // A socket path: redis-rs checks it.
        return Ok(Target::Node);
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    if !sentinel {
        host_port(hosts)?;
        let db = path.split(['?', '#']).next().unwrap_or("");
        let db = db.strip_prefix('/').unwrap_or(db);
        if !db.is_empty() && db.parse::<i64>().is_err() {
            return Err(format!("database `{db}` is not a number"));
        }
        return Ok(Target::Node);
    }
    let mut sentinels = Vec::new();
    for node in hosts.split(',') {
        let (host, port) = host_port(node)?;
        sentinels.push(format!("redis://{host}:{}/", port.unwrap_or(SENTINEL_PORT)));
    }
    if path.contains(['?', '#']) {
        return Err("query and fragment are not supported in a sentinel URL".to_owned());
    }
    let mut parts = path.trim_start_matches('/').split('/');
    let service = parts.next().unwrap_or("");
    if service.is_empty() {
        return Err(format!(
            "no master name: `{SENTINEL_SCHEME}://host:port[,host:port…]/<master name>[/<db>]`"
        ));
    }
    let db = match parts.next() {
        None | Some("") => 0,
        Some(db) => db
            .parse()
            .map_err(|_| format!("database `{db}` is not a number"))?,
    };
    if parts.any(|p| !p.is_empty()) {
        return Err("too many path segments: `…/<master name>[/<db>]`".to_owned());
    }
    let (username, password) = match userinfo {
        None => (None, None),
        Some(info) => {
            let (user, password) = match info.split_once(':') {
                Some((user, password)) => (user, Some(password)),
                None => (info, None),
            };
            (
                Some(percent_decode(user)?).filter(|u| !u.is_empty()),
                password.map(percent_decode).transpose()?,
            )
        }
    };
    Ok(Target::Sentinel(SentinelTarget {
        sentinels,
        service: percent_decode(service)?,
        db,
        username,
        password,
    }))
}

fn is_scheme(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// `host[:port]` or `[v6][:port]`: the host and the port, if given.
fn host_port(s: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if let Some(v6) = s.strip_prefix('[') {
        let close = v6
            .find(']')
            .ok_or_else(|| format!("`{s}`: an IPv6 address without its closing `]`"))?;
        let port = &v6[close + 1..];
        let port = match port.strip_prefix(':') {
            Some(p) => Some(p),
            None if port.is_empty() => None,
            None => return Err(format!("`{s}`: expected `:port` after `]`")),
        };
        (&s[..close + 2], port)
    } else {
        match s.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (s, None),
        }
    };
    if host.is_empty() {
        return Err("no host".to_owned());
    }
    let port = match port {
        None => None,
        Some(p) if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) => {
            return Err(format!("port `{p}` is not a number"));
        }
        Some(p) => match p.parse::<u32>() {
            Ok(n @ 1..=65535) => Some(n as u16),
            _ => return Err(format!("port {p} is out of range (1 to 65535)")),
        },
    };
    Ok((host, port))
}

fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or("a `%` not followed by two hex digits")?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "percent-encoding that is not UTF-8".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_even_in_urls_that_do_not_parse() {
        assert_eq!(
            redact("redis://:hunter2@localhost:6379/0"),
            "redis://:***@localhost:6379/0"
        );
        assert_eq!(
            redact("redis://app:hunter2@localhost"),
            "redis://app:***@localhost"
        );
        assert_eq!(redact("redis://hunter2@localhost"), "redis://***@localhost");
        assert_eq!(redact("redis//:hunter2@localhost"), "redis//:***@localhost");
        assert_eq!(redact("redis:hunter2@localhost"), "redis:***@localhost");
        assert_eq!(
            redact("redis://:pa@ss@localhost:99999"),
            "redis://:***@localhost:99999"
        );
        assert_eq!(redact("redis://localhost/"), "redis://localhost/");
        // A socket URL's password is a query parameter.
        assert_eq!(
            redact("unix:///run/r.sock?pass=hunter2&db=x"),
            "unix:///run/r.sock?pass=***&db=x"
        );
        assert_eq!(
            redact("redis+unix:///run/r.sock?db=1&PASSWORD=hunter2"),
            "redis+unix:///run/r.sock?db=1&PASSWORD=***"
        );
        assert_eq!(
            redact("redis://:hunter2@h/0?protocol=9"),
            "redis://:***@h/0?protocol=9"
        );
    }

    #[test]
    fn each_mistake_is_named() {
        let err = |u: &str| parse(u).unwrap_err();
        assert!(err("http://localhost").contains("scheme `http`"));
        assert!(err("redis//localhost").contains("missing `:`"));
        assert!(err("localhost:6379").contains("scheme `localhost` is not"));
        assert!(err("//localhost:6379").contains("no scheme"));
        assert!(err("redis:localhost").contains("missing `//`"));
        assert!(err("redis://localhost:99999").contains("port 99999 is out of range"));
        assert!(err("redis://localhost:0").contains("out of range"));
        assert!(err("redis://localhost:abc").contains("port `abc` is not a number"));
        assert!(err("redis://:pw@/").contains("no host"));
        assert!(err("redis://localhost/x").contains("database `x`"));
        assert!(err("redis+sentinel://h:26379").contains("no master name"));
        assert!(err("redis+sentinel://h:1,h:70000/m").contains("port 70000"));
        assert_eq!(parse("redis://[::1]:6379/2"), Ok(Target::Node));
        assert_eq!(parse("rediss://u:p@host.example/"), Ok(Target::Node));
        assert_eq!(parse("unix:///run/redis.sock"), Ok(Target::Node));
    }

    #[test]
    fn a_sentinel_url_names_sentinels_master_and_credentials() {
        let Ok(Target::Sentinel(t)) =
            parse("redis+sentinel://app:p%40ss@10.0.0.1,10.0.0.2:26380/shop/3")
        else {
            panic!("not a sentinel target");
        };
        assert_eq!(
            t.sentinels,
            ["redis://10.0.0.1:26379/", "redis://10.0.0.2:26380/"]
        );
        assert_eq!((t.service.as_str(), t.db), ("shop", 3));
        assert_eq!(t.username.as_deref(), Some("app"));
        assert_eq!(t.password.as_deref(), Some("p@ss"));
        assert!(!format!("{t:?}").contains("p@ss"));
    }
}
