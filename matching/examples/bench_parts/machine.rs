//! The machine the run is on (cores, CPU model, OS, Redis), and the servers' CPU time read from
//! `/proc` by thread id.

use serde_json::{json, Map, Value};

use super::redis_server::RedisServer;

pub(crate) fn machine(redis: &RedisServer) -> Map<String, Value> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    let os = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| format!("{} {}", std::env::consts::OS, s.trim()))
        .unwrap_or_else(|_| std::env::consts::OS.to_owned());
    let mut m = Map::new();
    m.insert(
        "cores".into(),
        json!(std::thread::available_parallelism().map_or(0, |n| n.get())),
    );
    m.insert("cpu_model".into(), json!(model));
    m.insert("os".into(), json!(os));
    m.insert(
        "redis".into(),
        json!(format!("{} {}", redis.binary, redis.version)),
    );
    m
}

/// The calling thread's id, from `/proc/thread-self` (a link to `PID/task/TID`).
pub(crate) fn current_tid() -> Option<u32> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

/// CPU time of the server runtime's threads, from `/proc/self/task/TID/schedstat` (ns).
pub(crate) struct ServerCpu {
    pub(crate) tids: Vec<u32>,
}

impl ServerCpu {
    pub(crate) fn ns(&self) -> u64 {
        self.tids
            .iter()
            .filter_map(|tid| {
                let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
                s.split_whitespace().next()?.parse::<u64>().ok()
            })
            .sum()
    }
}
