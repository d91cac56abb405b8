//! Matching's function library and its functions' arguments: one struct per function, whose
//! fields, in their declared order, are the function's `ARGV` as its header in the script names
//! them (`script/pointer.lua`, `script/operations.lua`). Every queue function takes the queue's
//! arguments first ([`QueueCall`], `script/queue.lua`), declared once and embedded in each. A
//! unit test holds each `FIELDS` to its function's header.

use std::sync::LazyLock;

use tower_waiting_room::store::redis_script;

/// The library's name, its version in it: `FUNCTION LOAD` answers it, and every function's
/// name starts with it. Written once here, as a macro so that each function's name can `concat!`
/// it at compile time (`match_args!`); the script writes it once too (`script/register.lua`'s
/// `LIBRARY`, from which it names every function) beside `script/library.lua`'s `#!lua` line,
/// which Redis reads as it is. A unit test holds the three equal. Matching is versioned apart
/// from the room (`twr_room_v<n>`).
macro_rules! library {
    () => {
        "twr_match_v1"
    };
}

/// The library's name (`library!`).
#[cfg_attr(not(test), allow(dead_code))]
pub(super) const LIBRARY: &str = library!();

/// Matching's function library, one Lua chunk assembled from its files under `script/` (one per
/// concern; `library.lua` first, for its `#!lua` line, then the room crate's readers of stored
/// numbers and of the time argument ([`redis_script`], the room's library holds the same
/// text), and `register.lua` last, after every definition its functions call): sent by
/// `FUNCTION LOAD REPLACE`, called by `FCALL <LIBRARY>_<op>`. One chunk, so the files share
/// its top-level locals. Assembled once, at its first use.
pub(super) static SCRIPT: LazyLock<String> = LazyLock::new(|| {
    [
        include_str!("script/library.lua"),
        redis_script::STORED_LUA,
        redis_script::TIME_LUA,
        include_str!("script/pointer.lua"),
        include_str!("script/queue.lua"),
        include_str!("script/formation.lua"),
        include_str!("script/operations.lua"),
        include_str!("script/register.lua"),
    ]
    .concat()
});

/// The names in `parts`, in their order, as an array of `N` (a function's `ARGV`: the shared
/// arguments, then its own).
const fn concat<const N: usize>(parts: &[&[&'static str]]) -> [&'static str; N] {
    let mut names = [""; N];
    let (mut at, mut part) = (0, 0);
    while part < parts.len() {
        let mut i = 0;
        while i < parts[part].len() {
            names[at] = parts[part][i];
            at += 1;
            i += 1;
        }
        part += 1;
    }
    assert!(at == N, "every name has its place");
    names
}

/// A function's arguments: the struct (a queue function's with [`QueueCall`] first, as `call`),
/// the fields in their `ARGV` order; `FUNCTION`, the registered function (`<LIBRARY>_<op>`, its
/// operation `$function`); `FIELDS`, the `ARGV`
/// names; `argv`, the arguments in that order (numbers in decimal, text as it is).
macro_rules! match_args {
    (
        $(#[$meta:meta])*
        $name:ident = $function:literal $(after $call:ident)? {
            $($(#[$fmeta:meta])* $field:ident: $ty:ty,)*
        }
    ) => {
        $(#[$meta])*
        pub(super) struct $name {
            $(
                /// The queue's arguments, first.
                pub(super) call: $call,
            )?
            $($(#[$fmeta])* pub(super) $field: $ty,)*
        }

        impl $name {
            /// The registered function (`script/register.lua`).
            pub(super) const FUNCTION: &'static str = concat!(library!(), "_", $function);

            /// The names of the `ARGV` in their order, as the function's header lists them.
            #[cfg_attr(not(test), allow(dead_code))]
            pub(super) const FIELDS: &'static [&'static str] = &concat::<
                { 0 $(+ $call::FIELDS.len())? + <[&str]>::len(&[$(stringify!($field)),*]) },
            >(&[$(&$call::FIELDS,)? &[$(stringify!($field)),*]]);

            /// The `ARGV`, in [`Self::FIELDS`] order.
            pub(super) fn argv(self) -> Vec<Vec<u8>> {
                let mut argv = Vec::with_capacity(Self::FIELDS.len());
                $(<$call>::write(self.call, &mut argv);)?
                $(argv.push(self.$field.to_string().into_bytes());)*
                argv
            }
        }
    };
}

/// The arguments every queue function takes first (`script/queue.lua`): the step's time, the
/// queue's size, the policy's timings and the crate's bounds.
pub(super) struct QueueCall {
    /// The time, as the library reads it (`time.lua`): `0` for the server's `TIME`.
    pub(super) now: String,
    /// The queue's group size.
    pub(super) size: u64,
    pub(super) fallback_after: u64,
    pub(super) timeout: u64,
    pub(super) confirm_ttl: u64,
    pub(super) keep_confirmed: u64,
    /// The most expiries and groups per step
    /// ([`MAX_MATCH_WORK_PER_CALL`](crate::store::MAX_MATCH_WORK_PER_CALL)).
    pub(super) max_work: u64,
    /// A claim joins only while younger than this (ms).
    pub(super) grace: u64,
    /// How long a used claim is remembered (ms).
    pub(super) used_keep: u64,
}

impl QueueCall {
    /// The names of [`QueueCall`]'s fields in their order, as the headers list them.
    pub(super) const FIELDS: [&'static str; 9] = [
        "now",
        "size",
        "fallback_after",
        "timeout",
        "confirm_ttl",
        "keep_confirmed",
        "max_work",
        "grace",
        "used_keep",
    ];

    fn write(self, argv: &mut Vec<Vec<u8>>) {
        argv.push(self.now.into_bytes());
        for n in [
            self.size,
            self.fallback_after,
            self.timeout,
            self.confirm_ttl,
            self.keep_confirmed,
            self.max_work,
            self.grace,
            self.used_keep,
        ] {
            argv.push(n.to_string().into_bytes());
        }
    }
}

match_args! {
    /// `<LIBRARY>_claim`: a new claim for `queue` if the pointer holds `expected`.
    PointerClaim = "claim" {
        /// The time, as the queue's ([`QueueCall`]).
        now: String,
        /// The value read, `""` for none.
        expected: String,
        /// The queue's key.
        queue: String,
        nonce: String,
        /// The pointer's TTL in ms.
        ttl: u64,
    }
}

match_args! {
    /// `<LIBRARY>_read`: the claim, its TTL renewed.
    PointerRead = "read" {
        ttl: u64,
    }
}

match_args! {
    /// `<LIBRARY>_drop`: the pointer deleted if it holds `expected`.
    PointerDrop = "drop" {
        expected: String,
    }
}

match_args! {
    /// `<LIBRARY>_touch`: the pointer's TTL renewed if it holds `expected`.
    PointerTouch = "touch" {
        expected: String,
        ttl: u64,
    }
}

match_args! {
    /// `<LIBRARY>_enter`: the user in the queue under their claim.
    Enter = "enter" after QueueCall {
        user: String,
        /// The claim read from the user's pointer.
        claim: String,
    }
}

match_args! {
    /// `<LIBRARY>_leave`: the user out of the queue.
    Leave = "leave" after QueueCall {
        user: String,
        claim: String,
    }
}

match_args! {
    /// `<LIBRARY>_confirm`: a group confirmed with the application's id.
    Confirm = "confirm" after QueueCall {
        /// The group's number (0 names none).
        number: u64,
        app: String,
    }
}

match_args! {
    /// `<LIBRARY>_tick`: the queue's housekeeping and formation.
    Tick = "tick" after QueueCall {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_waiting_room::__private::script_header::{
        argv_names, code, each_file_once, locals_of,
    };

    /// Every function's name and its `ARGV`'s.
    fn functions() -> [(&'static str, &'static [&'static str]); 8] {
        [
            (PointerClaim::FUNCTION, PointerClaim::FIELDS),
            (PointerRead::FUNCTION, PointerRead::FIELDS),
            (PointerDrop::FUNCTION, PointerDrop::FIELDS),
            (PointerTouch::FUNCTION, PointerTouch::FIELDS),
            (Enter::FUNCTION, Enter::FIELDS),
            (Leave::FUNCTION, Leave::FIELDS),
            (Confirm::FUNCTION, Confirm::FIELDS),
            (Tick::FUNCTION, Tick::FIELDS),
        ]
    }

    /// The line of `script/register.lua` that registers `function`: `register('<op>', ...`.
    fn registration(function: &str) -> String {
        let op = function
            .strip_prefix(concat!(library!(), "_"))
            .unwrap_or_else(|| panic!("{function} is not the library's"));
        format!("register('{op}', ")
    }

    #[test]
    fn every_functions_argv_header_matches_its_struct() {
        let functions = functions();
        for (function, fields) in functions {
            assert!(function.starts_with(&format!("{LIBRARY}_")), "{function}");
            assert!(
                SCRIPT.contains(&registration(function)),
                "{function} is registered"
            );
            assert_eq!(argv_names(&SCRIPT, function), fields, "{function}");
        }
        assert_eq!(
            SCRIPT.matches("\nregister('").count(),
            functions.len(),
            "every registered function has its struct"
        );
        assert!(SCRIPT.starts_with(&format!("#!lua name={LIBRARY}\n")));
    }

    /// Each registration refuses a call whose count of arguments is not its struct's: the
    /// count it names (`QUEUE_ARGS` being the queue's, [`QueueCall`]) is `FIELDS`'s.
    #[test]
    fn each_function_takes_as_many_arguments_as_its_struct_has() {
        for (function, fields) in functions() {
            let line = SCRIPT
                .lines()
                .find(|l| l.starts_with(&registration(function)))
                .unwrap();
            let count = line.trim_end_matches(')').rsplit(", ").next().unwrap();
            let count: usize = count
                .split(" + ")
                .map(|term| match term {
                    "QUEUE_ARGS" => QueueCall::FIELDS.len(),
                    n => n.parse().unwrap(),
                })
                .sum();
            assert_eq!(count, fields.len(), "{line}");
        }
        assert!(SCRIPT.contains(&format!(
            "local QUEUE_KEYS, QUEUE_ARGS = 8, {}\n",
            QueueCall::FIELDS.len()
        )));
    }

    /// The library's name is written once in Rust (`library!`: every function's name is made
    /// of it) and once in the script (register.lua's `LIBRARY`, from which it names every
    /// function), with library.lua's first line, which Redis reads as it is. The headers
    /// still name each function whole (`-- twr_match_v1_claim: ...`): a new version edits them
    /// too, which [`argv_names`] holds.
    #[test]
    fn the_librarys_name_is_written_once_in_each_language() {
        assert!(SCRIPT.starts_with(&format!("#!lua name={LIBRARY}\n")));
        assert_eq!(locals_of(&SCRIPT, &format!("'{LIBRARY}'")), ["LIBRARY"]);
        assert_eq!(code(&SCRIPT).matches(LIBRARY).count(), 2);
        let quoted = format!("\"{LIBRARY}");
        assert_eq!(include_str!("calls.rs").matches(quoted.as_str()).count(), 1);
        assert_eq!(include_str!("mod.rs").matches(quoted.as_str()).count(), 0);
    }

    /// Each file under `script/` goes into the library once (`each_file_once`), and so does
    /// each of the room crate's readers (stored numbers, the time argument), after the `#!lua`
    /// line, which stays the only one and the first.
    #[test]
    fn the_library_holds_each_script_file_once() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/store/redis/script");
        assert_eq!(each_file_once(&SCRIPT, dir), 6);
        assert_eq!(SCRIPT.matches(redis_script::STORED_LUA).count(), 1);
        assert_eq!(SCRIPT.matches(redis_script::TIME_LUA).count(), 1);
        assert_eq!(
            SCRIPT.matches("#!").count(),
            1,
            "one `#!lua` line, the first"
        );
    }

    #[test]
    fn the_arguments_go_in_their_declared_order() {
        let call = QueueCall {
            now: "1".to_owned(),
            size: 2,
            fallback_after: 3,
            timeout: 4,
            confirm_ttl: 5,
            keep_confirmed: 6,
            max_work: 7,
            grace: 8,
            used_keep: 9,
        };
        let confirm = Confirm {
            call,
            number: 10,
            app: "conv-1".to_owned(),
        }
        .argv();
        let want: Vec<Vec<u8>> = (1..=10)
            .map(|n: u64| n.to_string().into_bytes())
            .chain([b"conv-1".to_vec()])
            .collect();
        assert_eq!(confirm, want);
        assert_eq!(Confirm::FIELDS.len(), want.len());
        let claim = PointerClaim {
            now: "7".to_owned(),
            expected: String::new(),
            queue: "q".to_owned(),
            nonce: "ab".to_owned(),
            ttl: 60,
        }
        .argv();
        assert_eq!(
            claim,
            [&b"7"[..], b"", b"q", b"ab", b"60"].map(<[u8]>::to_vec)
        );
    }
}
