//! The calls' arguments held to the library's headers: each function's `ARGV` names and
//! count, and its registration.

use super::*;
use crate::script_header::{
    argv_names, code, definition, helpers_called, locals_of, registrations, table_fields,
};
use crate::store::redis::protocol::SCRIPT;

/// Every function the library registers (`script/register.lua`): its whole name, the
/// helper, the arguments after the name. Each helper is the only place its
/// `redis.register_function` is called (held below), so no function is registered another
/// way.
fn registered() -> Vec<(String, &'static str, Vec<&'static str>)> {
    registrations(include_str!("../script/register.lua"))
        .into_iter()
        .map(|(op, helper, args)| (format!("{LIBRARY}_{op}"), helper, args))
        .collect()
}

/// Every function's name and its `ARGV`'s.
fn declared() -> Vec<(&'static str, &'static [&'static str])> {
    let visitor = [
        VisitorOp::Enter,
        VisitorOp::Join,
        VisitorOp::Poll,
        VisitorOp::Heartbeat,
        VisitorOp::Release,
    ]
    .map(|op| (op.function(), Visitor::FIELDS));
    let others = [
        (Sync::FUNCTION, Sync::FIELDS),
        (JoinBatch::FUNCTION, JoinBatch::FIELDS),
        (Stats::FUNCTION, Stats::FIELDS),
        (Configure::FUNCTION, Configure::FIELDS),
        (AdmitNext::FUNCTION, AdmitNext::FIELDS),
        (Ban::FUNCTION, Ban::FIELDS),
        (TicketMint::FUNCTION, TicketMint::FIELDS),
        (TicketRedeem::FUNCTION, TicketRedeem::FIELDS),
        (AutoApply::FUNCTION, AutoApply::FIELDS),
        (AutoReport::FUNCTION, AutoReport::FIELDS),
        (AutoSwitch::FUNCTION, AutoSwitch::FIELDS),
    ];
    visitor.into_iter().chain(others).collect()
}

/// The name a function's header gives it (`-- <LIBRARY>_<op>: ...`): no version, so that a
/// new one is an edit of the library's name alone.
pub(crate) fn header_name(function: &str) -> String {
    let op = function
        .strip_prefix(concat!(library!(), "_"))
        .unwrap_or_else(|| panic!("{function} is not the library's"));
    format!("<LIBRARY>_{op}")
}

#[test]
fn every_functions_argv_header_matches_its_struct() {
    let mut functions: Vec<&str> = Vec::new();
    for (function, fields) in declared() {
        assert!(function.starts_with(&format!("{LIBRARY}_")), "{function}");
        assert_eq!(
            argv_names(SCRIPT, &header_name(function)),
            fields,
            "{function}"
        );
        functions.push(function);
    }
    let mut registered: Vec<String> = registered().into_iter().map(|r| r.0).collect();
    assert_eq!(
        SCRIPT.matches("redis.register_function").count(),
        SCRIPT.matches("\nlocal function register").count(),
        "each register helper calls redis.register_function once, and nothing else does"
    );
    registered.sort_unstable();
    functions.sort_unstable();
    assert_eq!(
        registered, functions,
        "every registered function has its struct, and every struct its function"
    );
}

/// Each room function is registered (`register(<op>, <body>, <own>, <has_session>,
/// <fast>)`) with as many arguments of its own as its struct has fields between the call's
/// and the schedule: `F.setup` refuses a call with fewer, or with more than one beyond them
/// (the schedule), and reads the first as the session when `has_session`. The fast path,
/// which reads an enter's arguments without `F.setup`, takes an enter's count, and each
/// function on a record alone reads, itself or through the helpers it hands its `args`,
/// every argument of its struct and none beyond.
#[test]
fn each_function_takes_as_many_arguments_as_its_struct_has() {
    let fields = |function: &str| {
        declared()
            .into_iter()
            .find(|(f, _)| *f == function)
            .unwrap_or_else(|| panic!("{function} has no struct"))
            .1
    };
    let call = Call::FIELDS.len();
    assert!(SCRIPT.contains(&format!("\nlocal CALL_ARGS = {call}\n")));
    for (function, helper, args) in registered() {
        let fields = fields(&function);
        if helper == "register_record" {
            // `F.<op>`, and the helpers it hands its arguments (`F.ticket_call`).
            let body = definition(SCRIPT, &format!("function {}(", args[0]));
            let handed = helpers_called(&body)
                .into_iter()
                .filter(|h| body.contains(&format!("{h}(args)")))
                .map(|h| definition(SCRIPT, &format!("function {h}(")));
            let read = std::iter::once(body.clone())
                .chain(handed)
                .flat_map(|code| {
                    code.split("args[")
                        .skip(1)
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .map(|at| at.split(']').next().unwrap().parse::<usize>().unwrap())
                .max();
            assert_eq!(
                read,
                Some(fields.len()),
                "{function} reads its every argument"
            );
            continue;
        }
        if helper == "register_batch" {
            // Its sessions in one argument, no schedule: the callback refuses any other count.
            assert_eq!(
                (function.as_str(), &args[..]),
                (JoinBatch::FUNCTION, &["F.join_batch"][..])
            );
            assert_eq!(fields.len(), call + 2, "{fields:?}");
            let body = definition(SCRIPT, "function F.join_batch(");
            assert!(
                body.contains("#args ~= CALL_ARGS + 1"),
                "the batch takes its sessions and nothing after them"
            );
            continue;
        }
        assert_eq!(helper, "register", "{function}");
        let [body, own, has_session, fast @ ..] = &args[..] else {
            panic!("{function}: {args:?}")
        };
        assert_eq!(
            own.parse::<usize>().unwrap(),
            fields.len() - call - 1,
            "{function}'s own arguments: {fields:?}"
        );
        assert_eq!(
            *has_session == "true",
            matches!(fields[call], "session" | "sessions"),
            "{function}'s first own argument: {fields:?}"
        );
        assert_eq!(*fields.last().unwrap(), "schedule", "{function}");
        assert!(
            SCRIPT.contains(&format!("\nfunction OPERATIONS.{body}()")),
            "{function}'s body"
        );
        // The fast path's two kinds of enter: enter's and join's own, on enter's body.
        if let [kind] = fast {
            assert_eq!((function, *body), (format!("{LIBRARY}_{kind}"), "enter"));
        }
    }
    assert!(
        code(SCRIPT).contains(&format!(
            "if (n ~= {} and n ~= {})",
            Visitor::FIELDS.len() - 1,
            Visitor::FIELDS.len()
        )),
        "the fast path takes an enter's arguments, with or without the schedule"
    );
}

/// The library's name is written once in Rust (`library!`: every function's name is made
/// of it) and once in the script (its `LIBRARY`, from which register.lua names every
/// function), with the `#!lua` line, which Redis reads as it is, beside it: a new version
/// is those edits alone.
#[test]
fn the_librarys_name_is_written_once_in_each_language() {
    assert_eq!(
        SCRIPT.lines().next(),
        Some(format!("#!lua name={LIBRARY}").as_str())
    );
    assert_eq!(locals_of(SCRIPT, &format!("'{LIBRARY}'")), ["LIBRARY"]);
    // In the script's code, the name is the `#!lua` line's and LIBRARY's alone.
    assert_eq!(code(SCRIPT).matches(LIBRARY).count(), 2);
    // In the store's Rust, it is `library!`'s alone, as a string (docs may name it).
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store/redis");
    let quoted = format!("\"{LIBRARY}");
    let mut written = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            written.extend(text.matches(quoted.as_str()).map(|_| path.clone()));
        }
    }
    assert_eq!(written.len(), 1, "{written:?}");
    assert!(written[0].ends_with("calls.rs"));
}

/// The packed numbers go in the order `F.setup` unpacks them in (`script/call.lua`): each
/// [`Number`] where the script names its local, read with as many bounds as there are
/// numbers (`F.read_numbers` refuses any other count), and the fast path, which reads
/// `line_numbers` itself, names the same at the same places.
#[test]
fn the_packed_numbers_go_in_the_order_the_script_unpacks_them() {
    let call = include_str!("../script/call.lua");
    let names = |numbers: &[Number]| numbers.iter().map(|n| n.name()).collect::<Vec<_>>();
    assert_eq!(locals_of(call, "unpack(line)"), names(&Number::LINE));
    assert_eq!(locals_of(call, "unpack(room)"), names(&Number::ROOM));
    assert_eq!(table_fields(call, "LINE_LIMITS").len(), Number::LINE.len());
    assert_eq!(table_fields(call, "ROOM_LIMITS").len(), Number::ROOM.len());
    let fast = locals_of(SCRIPT, "string.match(args[2], FAST_NUMBERS)");
    assert!(fast.len() <= Number::LINE.len());
    for (name, number) in fast.iter().zip(Number::LINE) {
        assert!(name == "_" || name == number.name(), "{fast:?}");
    }
    assert!(SCRIPT.contains(&format!(
        "local FAST_NUMBERS = '^{}$'",
        vec!["(%d+)"; Number::LINE.len()].join(":")
    )));
    // Each number its own: a policy of distinct numbers, read back by name.
    let s = std::time::Duration::from_secs;
    let policy = RoomPolicy::new("shop", 7)
        .with_admission_rate(Some(3))
        .with_max_queue_len(1_234)
        .with_ttls(s(61), s(17), s(29))
        .with_abandon_after(s(300));
    let [line, room] = packed_numbers(&policy);
    let sent: Vec<(&str, u64)> = Number::LINE
        .iter()
        .zip(line.split(':'))
        .chain(Number::ROOM.iter().zip(room.split(':')))
        .map(|(n, text)| (n.name(), text.parse().unwrap()))
        .collect();
    assert_eq!(sent.len(), 13);
    for (name, want) in [
        ("max_queue", 1_234),
        ("capacity", 7),
        ("rate", 3),
        ("queue_ttl", 29_000),
        ("active", 61_000),
        ("grant", 17_000),
        ("abandon", 300_000),
        ("promote", u64::from(MAX_PROMOTIONS_PER_CALL)),
        ("sweep", u64::from(MAX_SWEEP_PER_CALL)),
        ("bucket", ADMISSION_BUCKET_MS),
        ("ring", ADMISSION_BUCKETS),
        ("minute", MINUTE_BUCKETS),
        ("five", FIVE_MINUTE_BUCKETS),
    ] {
        assert!(sent.contains(&(name, want)), "{name}: {sent:?}");
    }
}

/// The time travels as the library reads it (`script/call.lua`): `0` for the server's,
/// the gateway's own as a number (never `0`, which would read as the server's), a manual
/// clock tagged `m`.
#[test]
fn the_time_travels_tagged_by_whose_clock_it_is() {
    let text = |now: Now| {
        let mut argv = Vec::new();
        now.write(&mut argv);
        String::from_utf8(argv.remove(0)).unwrap()
    };
    assert_eq!(text(Now::Server), "0");
    assert_eq!(text(Now::Sent(1_767_225_600_000)), "1767225600000");
    assert_eq!(text(Now::Sent(0)), "1");
    assert_eq!(text(Now::Manual(42)), "m42");
    assert_eq!(text(Now::Manual(0)), "m1");
}

#[test]
fn the_arguments_go_in_their_declared_order() {
    let call = || Call {
        now: Now::Sent(7),
        line_numbers: "1:2:3".to_owned(),
        room_numbers: "4:5".to_owned(),
        excused: true,
    };
    let s = SessionId::from_bytes([9; 16]);
    let ban = Ban {
        call: call(),
        session: s,
        until_ms: 42,
        schedule: None,
    }
    .argv();
    assert_eq!(
        ban,
        [
            b"7".to_vec(),
            b"1:2:3".to_vec(),
            b"4:5".to_vec(),
            b"1".to_vec(),
            vec![9; 16],
            b"42".to_vec(),
        ]
    );
    let visit = Visitor {
        call: call(),
        session: s,
        schedule: Some("schedule:1:0:1:5".to_owned()),
    }
    .argv();
    assert_eq!(visit.len(), Visitor::FIELDS.len());
    assert_eq!(visit.last().unwrap(), b"schedule:1:0:1:5");
    // A ticket call: its own fields only, the nonce in hex, the session as raw bytes.
    let nonce = TicketNonce::from_hex(&"0a".repeat(16)).unwrap();
    let redeem = TicketRedeem {
        nonce,
        now: Now::Sent(7),
        session: s,
    }
    .argv();
    assert_eq!(
        redeem,
        [b"0a".repeat(16), b"7".to_vec(), vec![9; 16]],
        "{:?}",
        TicketRedeem::FIELDS
    );
    // A controller's report: its own fields only, the gateway as the record keeps it.
    let report = AutoReport {
        now: Now::Manual(7),
        gateway: GatewayId::from_u64(0xab).unwrap(),
        window_ms: 5_000,
        lease_ms: 11_000,
        ok: 3,
        errors: 2,
        timeouts: 1,
        load: -1,
        latencies: b"4 3 ".to_vec(),
    }
    .argv();
    let text: Vec<&str> = report
        .iter()
        .map(|a| std::str::from_utf8(a).unwrap())
        .collect();
    assert_eq!(
        text,
        [
            "m7",
            "00000000000000ab",
            "5000",
            "11000",
            "3",
            "2",
            "1",
            "-1",
            "4 3 "
        ]
    );
}
