//! What proof of work costs a bot: native SHA-256 solving speed on this machine, per core.
//!
//! ```sh
//! cargo run --release --example pow_cost                       # about half a minute
//! cargo run --release --example pow_cost -- --browser-rate 95000  # add the browser's column
//! cargo run --example pow_cost -- --smoke                      # a second; CI checks it runs
//! ```
//!
//! Two native solvers run side by side on the same challenges: the crate's own
//! [`solve`](tower_waiting_room::defences::proof_of_work::solve) (ring's SHA-256, the whole input hashed
//! for every nonce), and what a careful bot writes: the SHA-256 state after the fixed
//! `<challenge>:` prefix computed once (`sha2`, which uses the CPU's SHA extensions when it has
//! them) and only the last block hashed per nonce. The browser's rate comes from the page itself
//! in headless Chromium (`cargo test --test browser -- --ignored --nocapture measure`) and is
//! passed in with `--browser-rate`.
//!
//! It prints, for each difficulty, the measured mean time per solution of both native solvers,
//! and what a bot farm pays for 1 000 places in line at that difficulty in core-hours (with the
//! faster of the two). The
//! numbers in `docs/security.md` come from this.

use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tower_waiting_room::__private::{leading_zero_bits, Challenge};
use tower_waiting_room::defences::proof_of_work::{is_solution, solve};
use tower_waiting_room::{Keyring, SessionId, SigningKey};

/// Fresh challenges as the room issues them (so the input length is the real one).
fn challenges(keys: &Keyring, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            Challenge::issue(SessionId::random(), 1_767_225_600_000 + i as u64, 300_000)
                .sign(keys, "drop")
        })
        .collect()
}

/// The careful bot: SHA-256 state after `<challenge>:` computed once.
fn solve_with_midstate(challenge: &str, difficulty: u8) -> u64 {
    let mut prefix = Sha256::new();
    prefix.update(challenge.as_bytes());
    prefix.update(b":");
    let mut buf = itoa_buf();
    for nonce in 0u64.. {
        let mut h = prefix.clone();
        h.update(itoa(nonce, &mut buf));
        if leading_zero_bits(&h.finalize()) >= u32::from(difficulty) {
            return nonce;
        }
    }
    unreachable!()
}

fn itoa_buf() -> [u8; 20] {
    [0; 20]
}

fn itoa(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// Solves challenges until `budget` has passed (at least `min` of them); returns (hashes, time).
fn measure(
    challenges: &[String],
    difficulty: u8,
    budget: Duration,
    min: usize,
    solver: fn(&str, u8) -> u64,
) -> (u64, Duration, usize) {
    let started = Instant::now();
    let mut hashes = 0;
    let mut solved = 0;
    for c in challenges {
        let nonce = solver(c, difficulty);
        assert!(is_solution(c, nonce, difficulty), "wrong solution");
        hashes += nonce + 1;
        solved += 1;
        if solved >= min && started.elapsed() >= budget {
            break;
        }
    }
    (hashes, started.elapsed(), solved)
}

fn main() {
    let mut smoke = false;
    let mut browser_rate: Option<f64> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--smoke" => smoke = true,
            "--browser-rate" => {
                browser_rate = args.next().and_then(|v| v.parse().ok());
                if browser_rate.is_none() {
                    eprintln!("--browser-rate needs a number of hashes per second");
                    std::process::exit(2);
                }
            }
            other => {
                eprintln!("unknown argument {other}; use --smoke or --browser-rate N");
                std::process::exit(2);
            }
        }
    }
    let keys = Keyring::new(SigningKey::generate("k1").expect("random key"));
    let pool = challenges(&keys, 100_000);
    let (difficulties, budget, min): (&[u8], _, _) = if smoke {
        (&[4, 8], Duration::from_millis(50), 2)
    } else {
        (&[12, 16, 18, 20], Duration::from_secs(3), 8)
    };

    // The hash rate, measured on many solutions, alternating the two solvers.
    let mut crate_total = (0u64, Duration::ZERO);
    let mut bot_total = (0u64, Duration::ZERO);
    let mut rows = Vec::new();
    let mut offset = 0;
    for &d in difficulties {
        let slice = &pool[offset..];
        let (h1, t1, n1) = measure(slice, d, budget, min, solve);
        let (h2, t2, n2) = measure(slice, d, budget, min, solve_with_midstate);
        offset += n1.max(n2);
        crate_total = (crate_total.0 + h1, crate_total.1 + t1);
        bot_total = (bot_total.0 + h2, bot_total.1 + t2);
        rows.push((
            d,
            n1,
            t1.as_secs_f64() / n1 as f64,
            n2,
            t2.as_secs_f64() / n2 as f64,
        ));
    }
    let rate = |(h, t): (u64, Duration)| h as f64 / t.as_secs_f64();
    let crate_rate = rate(crate_total);
    let bot_rate = rate(bot_total);
    println!(
        "native SHA-256 tries per second on one core: crate solver {:.0}, midstate bot {:.0} ({:.2}x)",
        crate_rate,
        bot_rate,
        bot_rate / crate_rate
    );
    println!();
    println!(
        "| difficulty | tries (mean) | crate solver, measured | midstate bot, measured | core-hours per 1 000 places (faster solver) |{}",
        if browser_rate.is_some() { " browser (from its rate) |" } else { "" }
    );
    println!(
        "|---|---|---|---|---|{}",
        if browser_rate.is_some() { "---|" } else { "" }
    );
    for (d, n1, s1, n2, s2) in rows {
        let tries = 2f64.powi(i32::from(d));
        // A bot uses whichever solver is faster.
        let core_hours = tries * 1_000.0 / crate_rate.max(bot_rate) / 3_600.0;
        print!(
            "| {d} | {tries:.0} | {} per solution ({n1} solved) | {} ({n2} solved) | {core_hours:.3} |",
            human(s1),
            human(s2)
        );
        if let Some(b) = browser_rate {
            print!(" {} |", human(tries / b));
        }
        println!();
    }
    println!();
    println!("(the mean of 2^d tries is the expectation; single solutions vary about as much as the mean itself)");
}

fn human(secs: f64) -> String {
    if secs < 1e-3 {
        format!("{:.0} µs", secs * 1e6)
    } else if secs < 1.0 {
        format!("{:.1} ms", secs * 1e3)
    } else if secs < 120.0 {
        format!("{secs:.1} s")
    } else {
        format!("{:.1} min", secs / 60.0)
    }
}
