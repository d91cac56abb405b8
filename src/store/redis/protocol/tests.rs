//! The protocol's unit tests: each reply read as the script writes it, and the script held to
//! the crate's names and constants (its reply codes, its `Runs` lines, its shared numbers).

use super::*;
use crate::script_header::{
    code, definition, helpers_called, registrations, runs_block, runs_helpers, table_fields,
};

#[test]
fn the_library_holds_each_script_file_once() {
    let files = crate::script_header::each_file_once(SCRIPT, "src/store/redis/script");
    assert!(files >= 10, "only {files} script files");
}

/// The reader of stored numbers (`script/stored.lua`) is the one every function of the
/// library reads a stored number with, the tickets' too: it goes in once (above), and no
/// file brings a second `#!lua` line of its own (the library's is its first line, which
/// names it). Matching's library has its own test (matching/src/store/redis/calls.rs).
#[test]
fn the_library_has_one_lua_line_and_the_reader_of_stored_numbers_once() {
    let stored = include_str!("../script/stored.lua");
    assert_eq!(SCRIPT.matches(stored).count(), 1);
    assert!(SCRIPT.starts_with("#!lua name="));
    assert_eq!(
        SCRIPT.lines().filter(|l| l.starts_with("#!")).count(),
        1,
        "one `#!lua` line, the first"
    );
}

/// The bounds the library holds a caller's numbers to (`script/call.lua`) are the ones the
/// builder refuses beyond, and the crate's own constants lie within them: a room the
/// builder accepts is never refused by the library.
#[test]
fn the_library_refuses_what_the_builder_refuses_and_nothing_it_sends() {
    use crate::store::{
        ADMISSION_BUCKETS, ADMISSION_BUCKET_MS, FIVE_MINUTE_BUCKETS, HISTORY_MINUTES,
        MAX_ADMIT_NEXT_PER_CALL, MAX_PROMOTIONS_PER_CALL, MAX_QUEUE_LEN_LIMIT, MAX_STORED_TTL_MS,
        MAX_SWEEP_PER_CALL, MINUTE_BUCKETS,
    };
    let call = include_str!("../script/call.lua");
    let line = call
        .lines()
        .find(|l| l.starts_with("local LIMIT_QUEUE, LIMIT_TTL = "))
        .expect("call.lua declares its limits");
    let numbers: Vec<u64> = line
        .split('=')
        .nth(1)
        .unwrap()
        .split(',')
        .map(|n| n.trim().parse().unwrap())
        .collect();
    assert_eq!(numbers, [MAX_QUEUE_LEN_LIMIT, MAX_STORED_TTL_MS]);
    // The constants the crate sends: within the library's 1 .. 100000 (ROOM_LIMITS and
    // OWN_LIMITS), the history within the ring.
    for n in [
        u64::from(MAX_PROMOTIONS_PER_CALL),
        u64::from(MAX_SWEEP_PER_CALL),
        u64::from(MAX_ADMIT_NEXT_PER_CALL),
        ADMISSION_BUCKETS,
        MINUTE_BUCKETS,
        FIVE_MINUTE_BUCKETS,
        HISTORY_MINUTES as u64,
    ] {
        assert!((1..=100_000).contains(&n), "{n}");
    }
    const {
        assert!(ADMISSION_BUCKET_MS <= 3_600_000);
        assert!(HISTORY_MINUTES as u64 * MINUTE_BUCKETS <= ADMISSION_BUCKETS);
        assert!(FIVE_MINUTE_BUCKETS <= ADMISSION_BUCKETS);
    }
}

#[test]
fn keys_share_the_room_hash_tag() {
    let keys = keys("twr", "shop");
    assert!(keys.iter().all(|k| k.starts_with("twr:{shop}:")));
    assert_eq!(keys.len(), KEY_COUNT);
}

#[test]
fn the_schedule_travels_as_a_tagged_last_argument() {
    use crate::config::EventSchedule;
    use std::time::{Duration, UNIX_EPOCH};
    let plain = RoomPolicy::new("shop", 1);
    let s = SessionId::from_bytes([1; 16]);
    assert_eq!(schedule_arg(Op::Enter, &plain, Some(s)), None);
    let schedule = EventSchedule::new(UNIX_EPOCH + Duration::from_millis(5_000), [9u8; 32])
        .with_closes_at(Some(UNIX_EPOCH + Duration::from_millis(9_000)))
        .with_keep_line_after_close(false);
    let draw = schedule.draw(s);
    let p = plain.with_schedule(Some(schedule));
    assert_eq!(
        schedule_arg(Op::Enter, &p, Some(s)).unwrap(),
        format!("schedule:5000:9000:0:{draw}")
    );
    assert_eq!(
        schedule_arg(Op::Poll, &p, Some(s)).unwrap(),
        "schedule:5000:9000:0:0",
        "only enter places anyone"
    );
    assert_eq!(
        decision(&[11, 5_000, 0]).unwrap(),
        Decision::Scheduled { opens_at_ms: 5_000 }
    );
    assert!(
        SCRIPT.contains("{11, opens_at_ms, 0} scheduled"),
        "the script's header"
    );
}

#[test]
fn replies_map_to_decisions() {
    assert_eq!(
        decision(&[1, 5, 0]).unwrap(),
        Decision::Admitted { expires_at_ms: 5 }
    );
    assert_eq!(
        decision(&[2, 3, 9, 1, 42]).unwrap(),
        Decision::Waiting {
            position: 3,
            waiting: 9,
            recent: AdmissionCounts::default(),
            paused: true,
            pace: RoomPace::default(),
            place: Some(Place::Seq(42)),
        }
    );
    assert_eq!(
        decision(&[2, 1, 9, 0, reply::DRAWN]).unwrap(),
        Decision::Waiting {
            position: 1,
            waiting: 9,
            recent: AdmissionCounts::default(),
            paused: false,
            pace: RoomPace::default(),
            place: Some(Place::Drawn),
        },
        "a registrant's place is drawn"
    );
    assert_eq!(
        decision(&[2, 3, 9, 0, -7]).unwrap_err().kind(),
        StoreErrorKind::Protocol,
        "no place is a negative number but the drawn mark"
    );
    assert_eq!(
        decision(&[2, 3, 9, 4, 20, 1, 2, 500, 60_000, 5])
            .unwrap_err()
            .kind(),
        StoreErrorKind::Protocol,
        "a waiting reply with counts and pace is from another script version"
    );
    assert_eq!(decision(&[6, 0, 0]).unwrap(), Decision::Closed);
    assert_eq!(decision(&[7, 0, 0]).unwrap(), Decision::Banned);
    assert_eq!(
        decision(&[2, 3, 9]).unwrap_err().kind(),
        StoreErrorKind::Protocol,
        "a waiting reply without its place is from another script version"
    );
    assert_eq!(decision(&[3, 0, 9]).unwrap(), Decision::Full { waiting: 9 });
    assert_eq!(decision(&[0, 0, 0]).unwrap(), Decision::Unknown);
    assert_eq!(decision(&[7]).unwrap_err().kind(), StoreErrorKind::Protocol);
    assert_eq!(
        decision(&[42, 0, 0]).unwrap_err().kind(),
        StoreErrorKind::Protocol
    );
}

#[test]
fn a_sync_reply_maps_to_a_snapshot() {
    use redis::Value;
    let text = |s: &str| Value::BulkString(s.as_bytes().to_vec());
    let mut reply = vec![12, 1_000, 3, 0, 1, 0, 0]
        .into_iter()
        .map(Value::Int)
        .collect::<Vec<_>>();
    reply.push(text("-0.25"));
    reply.extend(
        [
            4, 20, 2, 500, 60_000, 5, 0, 0, 0, 5, -1, -1, -1, 4, 6, 5, 5, 0, 1, 30_000, -1, 0, 7,
        ]
        .map(Value::Int),
    );
    // Three checkpoints, each rank, score, silent: the second one silent.
    reply.extend([
        Value::Int(3),
        Value::Int(0),
        text("-0.25"),
        Value::Int(0),
        Value::Int(1),
        text("7"),
        Value::Int(1),
        Value::Int(2),
        text("9"),
        Value::Int(0),
    ]);
    // The listed sessions without a place: one.
    let gone = SessionId::from_bytes([7; 16]);
    reply.push(Value::BulkString(gone.as_bytes().to_vec()));
    // The epochs checked in at, as the next sync names them back, and the abandon ring's next
    // one, into which the early check-ins went.
    reply.extend([
        text("57:30000:65536:ab"),
        text("2:900000:65536:ab"),
        text("3:900000:65536:ab"),
    ]);
    let SyncReply {
        snapshot: snap,
        epochs,
        early,
    } = snapshot(&reply).unwrap();
    assert_eq!(
        epochs,
        [b"57:30000:65536:ab".to_vec(), b"2:900000:65536:ab".to_vec()]
    );
    assert_eq!(early, b"3:900000:65536:ab".to_vec());
    assert_eq!(snap.unknown, vec![gone]);
    assert_eq!(snap.taken_at_ms, 1_000);
    assert_eq!(snap.head, Some(-0.25));
    assert_eq!(snap.waiting, 3);
    assert!(snap.open && !snap.paused && !snap.before_opening && !snap.line_closed);
    assert_eq!(snap.recent, AdmissionCounts::new(4, 20));
    assert_eq!(
        snap.pace,
        RoomPace::new(2, 500, 60_000, 5)
            .with_line([4, 6, 5, 5, 0], 1)
            .with_silent_after(30_000)
            .with_inside(7)
    );
    assert_eq!(
        snap.checkpoints,
        vec![
            Checkpoint {
                score: -0.25,
                rank: 0,
                silent: false,
            },
            Checkpoint {
                score: 7.0,
                rank: 1,
                silent: true,
            },
            Checkpoint {
                score: 9.0,
                rank: 2,
                silent: false,
            },
        ]
    );
    // Nobody waits: no head, no checkpoints.
    let mut empty = reply[..31].to_vec();
    empty[7] = text("");
    empty.push(Value::Int(0));
    empty.extend([text(""), text("1:1:65536"), text("1:2:65536"), text("")]);
    let empty = snapshot(&empty).unwrap();
    assert_eq!((empty.snapshot.head, empty.early), (None, Vec::new()));
    // A count that does not match the checkpoints (or the pairs of a library before
    // `twr_room_v10`), a score that is no number, a silence neither 0 nor 1, ids not of 16
    // bytes, no epochs (a library before version 5), no early epoch.
    let mut short = reply.clone();
    short.remove(short.len() - 5);
    assert_eq!(
        snapshot(&short).unwrap_err().kind(),
        StoreErrorKind::Protocol
    );
    for cut in [1, 3] {
        let mut short = reply.clone();
        short.truncate(short.len() - cut);
        assert_eq!(
            snapshot(&short).unwrap_err().kind(),
            StoreErrorKind::Protocol
        );
    }
    let mut short = reply.clone();
    let ids_at = short.len() - 4;
    short[ids_at] = text("abc");
    assert_eq!(
        snapshot(&short).unwrap_err().kind(),
        StoreErrorKind::Protocol
    );
    let mut garbled = reply.clone();
    garbled[32] = text("x");
    assert_eq!(
        snapshot(&garbled).unwrap_err().kind(),
        StoreErrorKind::Protocol
    );
    let mut garbled = reply.clone();
    garbled[34] = Value::Int(2);
    assert_eq!(
        snapshot(&garbled).unwrap_err().kind(),
        StoreErrorKind::Protocol
    );
    // The same checkpoints as pairs (rank, score), as `twr_room_v9` answered: refused.
    let mut pairs = reply.clone();
    for at in [40, 37, 34] {
        pairs.remove(at);
    }
    assert_eq!(
        snapshot(&pairs).unwrap_err().kind(),
        StoreErrorKind::Protocol
    );
}

#[test]
fn the_script_shares_the_crates_constants() {
    use crate::store::snapshot::{CHECKPOINT_GAP_DIVISOR, EXACT_RANKS};
    assert!(SCRIPT.contains(&format!(
        "local TURN_EPOCHS, ABANDON_EPOCHS = {TURN_EPOCHS}, {ABANDON_EPOCHS}\n"
    )));
    assert!(SCRIPT.contains(&format!(
        "local EXACT_RANKS, CHECKPOINT_GAP = {EXACT_RANKS}, {CHECKPOINT_GAP_DIVISOR}\n"
    )));
    assert!(SCRIPT.contains(&format!(
        "local SETTINGS_VERSION = {}\n",
        crate::store::SETTINGS_VERSION
    )));
    assert!(SCRIPT.contains(&format!("local BLOOM_SLACK = {BLOOM_SLACK}\n")));
    assert!(SCRIPT.contains(&format!("local MEMBER_BYTES = {MEMBER_BYTES}\n")));
    assert!(SCRIPT.contains(&format!("local EARLY_WINDOW = {EARLY_WINDOW}\n")));
    for (i, name) in KEY_NAMES.iter().enumerate() {
        assert!(
            SCRIPT.contains(&format!("--  {:>2} ", i + 1))
                || SCRIPT.contains(&format!("--   {} {name}", i + 1))
                || name.ends_with(|c: char| c.is_ascii_digit()),
            "the header documents KEYS[{}] {name}",
            i + 1
        );
    }
    assert_eq!(bloom_bits(0), (1 << 16) - 128);
    assert_eq!(bloom_bits(4_096), (1 << 16) - 128);
    // Just past a power of two: its first class, a quarter above it.
    assert_eq!(bloom_bits(4_097), (1 << 16) + (1 << 14) - 128);
    // The default line of 100 000 (1.6 million bits): 7/8 of 2^21.
    assert_eq!(bloom_bits(100_000), 7 * (1 << 18) - 128);
    assert_eq!(bloom_bits(2_000_000), (1 << 25) - 128);
    // Ten million and its 3 % (the benchmark's bound): 5/8 of 2^28, 20 MiB.
    assert_eq!(bloom_bits(10_312_500), 5 * (1 << 25) - 128);
    assert_eq!(bloom_bits(u64::MAX), (1 << 32) - 128);
    // Every size is a class of four to a power of two: the least one at or above 16 bits a
    // waiter.
    for n in (0..40)
        .map(|k| 4_000u64 << (k / 2))
        .chain([5_000, 77_777, 123_456_789])
    {
        let bits = bloom_bits(n) + 128;
        let power = bits.next_power_of_two();
        assert!(
            bits.is_multiple_of(power / 8) && bits > power / 2,
            "{n}: {bits}"
        );
        let need = (16 * n).clamp(1 << 16, 1 << 32);
        assert!(
            bits >= need && bits - need < power / 8,
            "{n}: {bits} for {need}"
        );
    }
}

#[test]
fn seen_sessions_travel_with_their_bloom_offsets() {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 1, 0, 3]);
    id[15] = 9;
    let s = SessionId::from_bytes(id);
    // 2^32 - 1 mod 2^16, and 65 539 mod 2^16.
    assert_eq!(bloom_offsets(&id, 1 << 16), (0xffff, 3));
    assert_eq!(bloom_offsets(&id, 1 << 32), (u32::MAX, 65_539));
    let arg = seen_arg(&[s, s]);
    assert_eq!(arg.len(), 2 * SEEN_ENTRY_BYTES);
    assert_eq!((&arg[..16], &arg[16..]), (&id[..], &id[..]));
    let bits = bloom_bits(4_096);
    // 2^32 - 1 and 65 539, each mod 65 408 (2^16 - 128).
    assert_eq!(
        offsets_arg(offsets_of(&[s, s], bits)),
        b"16383 131 16383 131 "
    );
    assert_eq!(
        offsets_arg([(0, u32::MAX), (1_000_000, 10)]),
        b"0 4294967295 1000000 10 "
    );
    assert!(offsets_arg([]).is_empty());
}

fn server_error(line: &str) -> RedisError {
    // Parse a real RESP error line, as the client would receive it.
    let frame = format!("-{line}\r\n");
    match redis::parse_redis_value(frame.as_bytes()) {
        Ok(redis::Value::ServerError(e)) => e.into(),
        other => panic!("not a server error: {other:?}"),
    }
}

#[test]
fn errors_are_classified_by_code() {
    let cases = [
        (
            "READONLY You can't write against a read only replica.",
            ErrorClass::Failover,
        ),
        (
            "LOADING Redis is loading the dataset in memory",
            ErrorClass::Failover,
        ),
        ("MASTERDOWN Link with MASTER is down", ErrorClass::Failover),
        (
            "TRYAGAIN Multiple keys request during rehashing",
            ErrorClass::Failover,
        ),
        ("CLUSTERDOWN The cluster is down", ErrorClass::Failover),
        (
            "NOREPLICAS Not enough good replicas to write.",
            ErrorClass::Failover,
        ),
        (
            "OOM command not allowed when used memory > 'maxmemory'.",
            ErrorClass::OutOfMemory,
        ),
        (
            "BUSY Redis is busy running a script.",
            ErrorClass::ScriptBusy,
        ),
        (
            "NOPERM this user has no permissions to run the 'evalsha' command",
            ErrorClass::Misconfigured,
        ),
        ("NOAUTH Authentication required.", ErrorClass::Misconfigured),
        (
            "WRONGPASS invalid username-password pair",
            ErrorClass::Misconfigured,
        ),
        (
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            ErrorClass::Misconfigured,
        ),
        (
            "MISCONF Redis is configured to save RDB snapshots",
            ErrorClass::Misconfigured,
        ),
        ("NOSCRIPT No matching script.", ErrorClass::Misconfigured),
        // Seen only when loading the library and retrying did not help.
        ("ERR Function not found", ErrorClass::Misconfigured),
        (
            "ERR user_script:1: something went wrong",
            ErrorClass::Protocol,
        ),
        // The code decides, never the text.
        ("ERR READONLY OOM NOPERM", ErrorClass::Protocol),
        (
            "WRSETTINGS room settings of version 6, this crate reads version 5",
            ErrorClass::VersionMix,
        ),
    ];
    for (line, class) in cases {
        let (got, e) = classify(server_error(line));
        assert_eq!(got, class, "{line}");
        assert_eq!(e.kind(), class.kind(), "{line}");
        assert_eq!(
            e.is_version_mix(),
            class == ErrorClass::VersionMix,
            "{line}"
        );
    }
    let (_, e) = classify(server_error(
        "WRSETTINGS room settings of version 6, this crate reads version 5",
    ));
    assert!(e.to_string().contains("version 6"), "{e}");
    let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
    assert_eq!(classify(io).0, ErrorClass::Connection);
    let timeout = RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
    assert_eq!(classify(timeout).0, ErrorClass::Timeout);
}

/// The script builds every reply with keys.lua's `REPLY`, whose names and numbers are
/// [`reply`]'s (in lower case): a code renamed or renumbered on either side fails here, and so
/// does a reply built with a bare number.
#[test]
fn the_scripts_reply_codes_are_the_crates() {
    let mut script: Vec<(String, i64)> = table_fields(SCRIPT, "REPLY")
        .iter()
        .map(|field| {
            let (name, n) = field.split_once(" = ").expect("name = code");
            (name.to_uppercase(), n.parse().expect("a number"))
        })
        .collect();
    let mut named: Vec<(String, i64)> = reply::ALL
        .iter()
        .map(|&(name, n)| (name.to_owned(), n))
        .collect();
    script.sort_unstable();
    named.sort_unstable();
    assert_eq!(script, named);
    let code = code(SCRIPT);
    for (name, _) in reply::ALL {
        let name = format!("REPLY.{}", name.to_lowercase());
        assert!(code.contains(&name), "{name} is never answered");
    }
    // Where a reply is made: none with a number for its code (or a place of -1).
    for made in ["return {", "out = {", "settings_reply("] {
        for (at, _) in code.match_indices(made) {
            let rest = &code[at + made.len()..];
            assert!(
                !rest.starts_with(|c: char| c.is_ascii_digit() || c == '-'),
                "a bare code: {}",
                &code[at..(at + 40).min(code.len())]
            );
        }
    }
    assert!(!code.contains("place = -"), "the drawn place by its name");
}

/// Each registered function's header says what it runs (`-- Runs:`), and so does the room's
/// call around every room function's body (register.lua): every helper a block names is
/// defined (`function F.<name>(`) in the file it names it under (the header's own, else the
/// nearest `<file>.lua` before it), and every helper the body calls itself is named (a function
/// that shares its body with another, join with enter, may leave them to the other's).
#[test]
fn each_functions_runs_line_names_what_it_runs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store/redis/script");
    let read = |file: &str| {
        std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    let named_in = |block: &str, own: &str| {
        let mut named = std::collections::BTreeSet::new();
        for (file, helper) in runs_helpers(block, own) {
            assert!(
                read(&file).contains(&format!("\nfunction {helper}(")),
                "{helper} is no function of {file}: {block}"
            );
            named.insert(helper);
        }
        named
    };
    // The room's call: what register.lua's callback calls.
    let register = read("register.lua");
    let at = register
        .find("-- The room's call of the operation")
        .unwrap();
    let block = runs_block(&register, at).expect("the room's call says what it runs");
    let named = named_in(&block, "register.lua");
    let mut called = helpers_called(&definition(&register, "function F.room_call("));
    called.remove("F.room_call");
    assert!(called.is_subset(&named), "{called:?} {block}");
    // Each function's header, and its body.
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".lua"))
        .collect();
    let mut bodies = std::collections::BTreeMap::<String, std::collections::BTreeSet<_>>::new();
    for (op, helper, args) in registrations(&register) {
        let header = format!("\n-- <LIBRARY>_{op}: ");
        let (file, text) = files
            .iter()
            .map(|f| (f.as_str(), read(f)))
            .find(|(_, text)| text.contains(&header))
            .unwrap_or_else(|| panic!("no header for {op}"));
        let start = text.find(&header).unwrap() + 1;
        let block =
            runs_block(&text, start).unwrap_or_else(|| panic!("{op} says not what it runs"));
        let body = match helper {
            "register" => format!("OPERATIONS.{}", args[0]),
            _ => args[0].to_owned(),
        };
        bodies
            .entry(body)
            .or_default()
            .extend(named_in(&block, file));
    }
    for (body, named) in bodies {
        let mut called = helpers_called(&definition(SCRIPT, &format!("function {body}(")));
        called.remove(&body);
        assert!(
            called.is_subset(&named),
            "{body} calls {:?}, which its header's Runs names not",
            called.difference(&named).collect::<Vec<_>>()
        );
    }
}
