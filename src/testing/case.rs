//! One case of a conformance suite ([`conformance`](super::conformance) for rooms, the
//! `testing` module of `tower-waiting-room-matching` for matching): its name and its function
//! over the suite's harness `H`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

/// The future a case of a suite returns.
pub type CaseFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// One case of a suite: its name and its function.
pub struct Case<H: 'static> {
    name: &'static str,
    multi_thread: bool,
    run: for<'a> fn(&'a H) -> CaseFuture<'a>,
}

impl<H> Clone for Case<H> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<H> Copy for Case<H> {}

impl<H> Case<H> {
    /// A case named `name` (its function's name) that runs `run`; `multi_thread` for the
    /// concurrency cases. Not public API: the suites' macros make them.
    #[doc(hidden)]
    pub const fn new(
        name: &'static str,
        multi_thread: bool,
        run: for<'a> fn(&'a H) -> CaseFuture<'a>,
    ) -> Self {
        Self {
            name,
            multi_thread,
            run,
        }
    }

    /// The case's name, which is also the name of its function in the suite's module.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether the case is about concurrency and is best run on a multi-thread runtime (as the
    /// suite's test macro does). On a current-thread runtime it still runs, its tasks
    /// interleaved on one thread.
    pub fn multi_thread(&self) -> bool {
        self.multi_thread
    }

    /// Runs the case on `harness`; the future panics if the store fails it.
    pub fn run<'a>(&self, harness: &'a H) -> CaseFuture<'a> {
        (self.run)(harness)
    }
}

impl<H> fmt::Debug for Case<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Case")
            .field("name", &self.name)
            .field("multi_thread", &self.multi_thread)
            .finish_non_exhaustive()
    }
}

/// A small deterministic PRNG (xorshift64*), so failures reproduce: the
/// suites' random cases draw from it.
#[derive(Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The parts of a suite's test macro that do not depend on the suite: one `#[test]` per case
/// (on a current-thread runtime, or a multi-thread one for the concurrency cases) and the list
/// of [`Case`]s, for the suite module `$suite` of `crate::testing`.
#[doc(hidden)]
#[macro_export]
macro_rules! __suite_parts {
    (@tests $suite:ident [$make:expr]; current: [$($case:ident),* $(,)?]; multi_thread: [$($mt:ident),* $(,)?]) => {
        $(
            #[test]
            fn $case() {
                $crate::testing::conformance::__block_on(false, async {
                    let harness = ($make)().await;
                    $crate::testing::$suite::$case(&harness).await;
                });
            }
        )*
        $(
            #[test]
            fn $mt() {
                $crate::testing::conformance::__block_on(true, async {
                    let harness = ($make)().await;
                    $crate::testing::$suite::$mt(&harness).await;
                });
            }
        )*
    };
    (@list $suite:ident; current: [$($case:ident),* $(,)?]; multi_thread: [$($mt:ident),* $(,)?]) => {
        [
            $($crate::testing::$suite::Case::new(
                stringify!($case),
                false,
                |h| ::std::boxed::Box::pin($crate::testing::$suite::$case(h)),
            ),)*
            $($crate::testing::$suite::Case::new(
                stringify!($mt),
                true,
                |h| ::std::boxed::Box::pin($crate::testing::$suite::$mt(h)),
            ),)*
        ]
    };
}
