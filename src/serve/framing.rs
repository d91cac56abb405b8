//! A connection's requests as framed on the wire, followed beside hyper's parser for the one
//! thing it does not tell the service: a head that carries both `Content-Length` and
//! `Transfer-Encoding`.
//!
//! hyper reads such a request as chunked and drops its `Content-Length` (RFC 9112, section 6.3,
//! allows that), so the service never learns that the two disagreed. Two readers taking one
//! body two ways is how requests are smuggled past a proxy, and the same section says a server
//! "ought to handle" such a request "as an error": the serving loop answers it `400` and
//! closes the connection, before the service sees it.
//!
//! [`Framing`] sees every byte hyper reads, in order, before hyper parses it: by the time hyper
//! calls the service for a connection's n-th request, the n-th head has been read here. Heads
//! are parsed with httparse, as hyper parses them (its defaults, the same header limit), and
//! bodies skipped by their framing (a length, or chunks) as hyper's decoder reads them. What
//! cannot be followed (bytes hyper refuses too, or an upgraded connection's new protocol) ends
//! the watch: hyper closes such a connection or no longer reads requests from it, and a request
//! it still served would reach the service as hyper framed it, chunked only.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

/// Which of a connection's requests are refused: those from the first ambiguous head on
/// (hyper closes the connection after that one anyway).
#[derive(Debug)]
pub(super) struct Verdict {
    first_ambiguous: AtomicU32,
    /// Whether hyper's last read found nothing while a request's body was still to come: the
    /// server waits on the client, not the other way round.
    waiting_on_body: AtomicBool,
}

impl Verdict {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            first_ambiguous: AtomicU32::new(u32::MAX),
            waiting_on_body: AtomicBool::new(false),
        })
    }

    /// Whether the connection's `request`-th request (from 0) must be refused.
    pub(super) fn refuses(&self, request: u32) -> bool {
        request >= self.first_ambiguous.load(Ordering::Acquire)
    }

    /// Whether the connection waits on its client for the rest of a request's body: hyper
    /// asked for more of it, and nothing had come. (A service that stops reading a body has
    /// hyper stop asking, and then this says no: the wait is the service's.)
    pub(super) fn waiting_on_body(&self) -> bool {
        self.waiting_on_body.load(Ordering::Acquire)
    }
}

/// Headers httparse can hold on the stack; a larger `max_headers` takes a vector per head.
const STACK_HEADERS: usize = 128;

/// The watch over one connection's input. See the [module docs](self).
#[derive(Debug)]
pub(super) struct Framing {
    state: State,
    /// The bytes so far of a head that has not arrived whole.
    partial: Vec<u8>,
    /// How many of them were looked at for a head's end.
    scanned: usize,
    /// Heads parsed (complete or not), for the tests of how often that happens.
    #[cfg(test)]
    parses: usize,
    /// Heads read whole so far.
    heads: u32,
    max_head_bytes: usize,
    max_headers: usize,
    verdict: Arc<Verdict>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before a request's head (or inside one, with its bytes in `partial`).
    Head,
    /// Inside a body of a known length: this many bytes left.
    Length(u64),
    /// Inside a chunked body.
    Chunks(Chunk),
    /// Past what can be followed: nothing more is read.
    Lost,
}

/// Where in a chunked body, as hyper's decoder steps through one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// A chunk's size in hex; `digits` once one was read.
    Size { size: u64, digits: bool },
    /// Spaces or tabs after the size.
    SizeSpace(u64),
    /// A chunk extension, up to the line's end.
    Extension(u64),
    /// The line feed after the size line's carriage return.
    SizeLf(u64),
    /// A chunk's data: this many bytes left.
    Data(u64),
    /// The carriage return after a chunk's data.
    DataCr,
    /// The line feed after a chunk's data.
    DataLf,
    /// After the last chunk: a trailer line or the body's last line.
    EndCr,
    /// Inside a trailer line.
    Trailer,
    /// The line feed after a trailer line.
    TrailerLf,
    /// The body's last line feed.
    EndLf,
}

impl Framing {
    /// A watch for a connection whose heads hyper parses within these limits, and the verdict
    /// it keeps for the connection's requests.
    pub(super) fn new(max_head_bytes: usize, max_headers: usize) -> (Self, Arc<Verdict>) {
        let verdict = Verdict::new();
        let framing = Self {
            state: State::Head,
            partial: Vec::new(),
            scanned: 0,
            #[cfg(test)]
            parses: 0,
            heads: 0,
            max_head_bytes,
            max_headers,
            verdict: Arc::clone(&verdict),
        };
        (framing, verdict)
    }

    /// Notes a read of hyper's that found nothing yet (`pending`) or brought bytes: while a
    /// request's body is still to come, a read that found nothing means the connection waits on
    /// its client ([`Verdict::waiting_on_body`]).
    pub(super) fn note_read(&self, pending: bool) {
        let in_body = matches!(self.state, State::Length(_) | State::Chunks(_));
        self.verdict
            .waiting_on_body
            .store(pending && in_body, Ordering::Release);
    }

    /// Follows bytes just read from the connection.
    pub(super) fn read(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let used = match self.state {
                State::Lost => return,
                State::Head => self.head(bytes),
                State::Length(left) => {
                    let used = usize::try_from(left).map_or(bytes.len(), |l| l.min(bytes.len()));
                    let left = left - used as u64;
                    self.state = if left == 0 {
                        State::Head
                    } else {
                        State::Length(left)
                    };
                    used
                }
                State::Chunks(Chunk::Data(left)) => {
                    let used = usize::try_from(left).map_or(bytes.len(), |l| l.min(bytes.len()));
                    let left = left - used as u64;
                    self.state = State::Chunks(if left == 0 {
                        Chunk::DataCr
                    } else {
                        Chunk::Data(left)
                    });
                    used
                }
                State::Chunks(chunk) => {
                    self.state = step(chunk, bytes[0]);
                    1
                }
            };
            bytes = &bytes[used..];
        }
    }

    /// Reads what it can of a head from `bytes`; returns how many of them it used.
    fn head(&mut self, bytes: &[u8]) -> usize {
        if self.partial.is_empty() {
            if let Some(len) = self.parse(bytes) {
                return len;
            }
            // No whole head in `bytes`: all of it is the start of one.
            self.keep(bytes);
            self.scanned = self.partial.len();
            if self.partial.len() > self.max_head_bytes {
                // Incomplete past the limit: hyper refuses the head too.
                self.lose();
            }
            return bytes.len();
        }
        let before = self.partial.len();
        let taken = self.keep(bytes);
        // Only a head's end completes it: the new bytes (and the two before them, where an end
        // may have begun) are looked at for one, as hyper does, rather than the whole head
        // parsed again at every read (which a head sent a byte at a time makes quadratic).
        let from = self.scanned.saturating_sub(2);
        let ends = has_end(&self.partial[from..]);
        self.scanned = self.partial.len();
        if ends {
            let partial = std::mem::take(&mut self.partial);
            let parsed = self.parse(&partial);
            if let Some(len) = parsed {
                if self.state != State::Lost {
                    // The vector is kept for the next head that comes in pieces.
                    self.partial = partial;
                    self.partial.clear();
                }
                self.scanned = 0;
                // The head ended within the bytes taken from this read.
                return len.saturating_sub(before).min(taken);
            }
            self.partial = partial;
        }
        if self.partial.len() > self.max_head_bytes {
            // Incomplete past the limit: hyper refuses the head too.
            self.lose();
        }
        bytes.len()
    }

    /// Keeps an incomplete head's bytes: at most one more than the head limit, which is
    /// enough to see any head hyper accepts end (a read may carry more after it: the body,
    /// the next requests). Returns how many of `bytes` it kept.
    fn keep(&mut self, bytes: &[u8]) -> usize {
        let room = (self.max_head_bytes + 1).saturating_sub(self.partial.len());
        let taken = bytes.len().min(room);
        self.partial.extend_from_slice(&bytes[..taken]);
        taken
    }

    /// Parses a head from the start of `bytes`: its length once whole, `None` while partial.
    fn parse(&mut self, bytes: &[u8]) -> Option<usize> {
        #[cfg(test)]
        {
            self.parses += 1;
        }
        let mut on_stack = [MaybeUninit::<httparse::Header<'_>>::uninit(); STACK_HEADERS];
        let mut on_heap;
        let headers = if self.max_headers <= STACK_HEADERS {
            &mut on_stack[..self.max_headers]
        } else {
            on_heap = vec![MaybeUninit::uninit(); self.max_headers];
            &mut on_heap[..]
        };
        let mut req = httparse::Request::new(&mut []);
        let len = match req.parse_with_uninit_headers(bytes, headers) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return None,
            Err(_) => {
                // hyper refuses the head too, and closes the connection.
                self.lose();
                return Some(bytes.len());
            }
        };
        let http_11 = req.version == Some(1);
        let (mut length, mut lengths, mut encoded, mut chunked) = (None, false, false, false);
        for header in req.headers.iter() {
            if header.name.eq_ignore_ascii_case("content-length") {
                lengths = true;
                length = digits(header.value);
            } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
                encoded = true;
                // Only the last line's last coding counts, as in hyper.
                chunked = std::str::from_utf8(header.value).is_ok_and(|v| {
                    v.rsplit(',')
                        .next()
                        .is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"))
                });
            }
        }
        let index = self.heads;
        self.heads = self.heads.saturating_add(1);
        if lengths && encoded {
            self.verdict
                .first_ambiguous
                .fetch_min(index, Ordering::AcqRel);
        }
        self.state = match (encoded, chunked, length) {
            (true, true, _) if http_11 => State::Chunks(Chunk::Size {
                size: 0,
                digits: false,
            }),
            // A coding other than chunked last, or one in HTTP/1.0: hyper refuses the head.
            (true, _, _) => State::Lost,
            (false, _, Some(0)) => State::Head,
            (false, _, Some(n)) => State::Length(n),
            // An unreadable length: hyper refuses the head.
            (false, _, None) if lengths => State::Lost,
            (false, _, None) => State::Head,
        };
        Some(len)
    }

    fn lose(&mut self) {
        self.state = State::Lost;
        self.partial = Vec::new();
        self.scanned = 0;
    }
}

/// Whether `bytes` hold the end of a head: an empty line after a line, `\n\n` or `\n\r\n`
/// (`\r\n\r\n` among them), as httparse ends one.
fn has_end(bytes: &[u8]) -> bool {
    bytes
        .windows(2)
        .enumerate()
        .any(|(i, w)| w == b"\n\n" || (w == b"\n\r" && bytes.get(i + 2) == Some(&b'\n')))
}

/// A `Content-Length` value as hyper reads it: decimal digits only, no sign, no overflow.
fn digits(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |n, &b| match b {
        b'0'..=b'9' => n.checked_mul(10)?.checked_add(u64::from(b - b'0')),
        _ => None,
    })
}

/// One byte of a chunked body outside a chunk's data.
fn step(chunk: Chunk, byte: u8) -> State {
    let next = match (chunk, byte) {
        (Chunk::Size { size, .. }, b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F') => {
            // The digit's value: hex digits are ASCII, so `to_digit` cannot fail here.
            let digit = u64::from(char::from(byte).to_digit(16).unwrap_or(0));
            match size.checked_mul(16).and_then(|s| s.checked_add(digit)) {
                Some(size) => Chunk::Size { size, digits: true },
                None => return State::Lost,
            }
        }
        (Chunk::Size { digits: false, .. }, _) => return State::Lost,
        (Chunk::Size { size, .. } | Chunk::SizeSpace(size), b' ' | b'\t') => Chunk::SizeSpace(size),
        (Chunk::Size { size, .. } | Chunk::SizeSpace(size) | Chunk::Extension(size), b';') => {
            Chunk::Extension(size)
        }
        (Chunk::Size { size, .. } | Chunk::SizeSpace(size) | Chunk::Extension(size), b'\r') => {
            Chunk::SizeLf(size)
        }
        (Chunk::Extension(_), b'\n') => return State::Lost,
        (Chunk::Extension(size), _) => Chunk::Extension(size),
        (Chunk::SizeLf(0), b'\n') => Chunk::EndCr,
        (Chunk::SizeLf(size), b'\n') => Chunk::Data(size),
        (Chunk::DataCr, b'\r') => Chunk::DataLf,
        (Chunk::DataLf, b'\n') => Chunk::Size {
            size: 0,
            digits: false,
        },
        (Chunk::EndCr, b'\r') => Chunk::EndLf,
        (Chunk::Trailer, b'\r') => Chunk::TrailerLf,
        (Chunk::EndCr | Chunk::Trailer, _) => Chunk::Trailer,
        (Chunk::TrailerLf, b'\n') => Chunk::EndCr,
        (Chunk::EndLf, b'\n') => return State::Head,
        _ => return State::Lost,
    };
    State::Chunks(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch() -> (Framing, Arc<Verdict>) {
        Framing::new(64 * 1024, 100)
    }

    /// Feeds `input` in pieces of `piece` bytes; returns the heads read and the refused index.
    fn follow(input: &[u8], piece: usize) -> (u32, Option<u32>, State) {
        let (mut framing, verdict) = watch();
        for part in input.chunks(piece) {
            framing.read(part);
        }
        let first = verdict.first_ambiguous.load(Ordering::Acquire);
        (
            framing.heads,
            (first != u32::MAX).then_some(first),
            framing.state,
        )
    }

    /// Every way of cutting `input` into reads gives the same answer as reading it at once.
    fn same_in_any_pieces(input: &[u8]) -> (u32, Option<u32>, State) {
        let whole = follow(input, input.len().max(1));
        for piece in 1..input.len().min(40) {
            assert_eq!(follow(input, piece), whole, "in pieces of {piece}");
        }
        whole
    }

    const GET: &[u8] = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n";

    #[test]
    fn pipelined_requests_with_and_without_bodies_are_followed_to_the_next_head() {
        let mut input = Vec::new();
        input.extend_from_slice(GET);
        input.extend_from_slice(b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nGET /");
        input.extend_from_slice(
            b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
              3;ext=1\r\nGET\r\n0\r\nX-Trailer: GET / HTTP/1.1\r\n\r\n",
        );
        input.extend_from_slice(b"\r\n");
        input.extend_from_slice(GET);
        let (heads, refused, state) = same_in_any_pieces(&input);
        assert_eq!((heads, refused, state), (4, None, State::Head));
    }

    #[test]
    fn a_head_with_both_lengths_is_refused_whichever_comes_first() {
        for both in [
            "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n",
            "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n",
            "transfer-encoding: gzip, chunked\r\ncontent-length: 30\r\n",
        ] {
            let mut input = GET.to_vec();
            input.extend_from_slice(format!("POST / HTTP/1.1\r\nHost: x\r\n{both}\r\n").as_bytes());
            input.extend_from_slice(b"3\r\nabc\r\n0\r\n\r\n");
            input.extend_from_slice(GET);
            let (heads, refused, _) = same_in_any_pieces(&input);
            assert_eq!((heads, refused), (3, Some(1)), "{both:?}");
        }
        let (mut framing, verdict) = watch();
        framing.read(b"GET / HTTP/1.1\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert!(verdict.refuses(0) && verdict.refuses(1));
    }

    #[test]
    fn a_body_that_looks_like_a_head_is_not_read_as_one() {
        let smuggled = b"GET / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
        let mut input = format!(
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
            smuggled.len()
        )
        .into_bytes();
        input.extend_from_slice(smuggled);
        let (heads, refused, state) = same_in_any_pieces(&input);
        assert_eq!((heads, refused, state), (1, None, State::Head));
    }

    #[test]
    fn what_hyper_refuses_ends_the_watch() {
        for bad in [
            &b"GET / HTTP/1.1\r\nHost x\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: x\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX",
        ] {
            let (_, refused, state) = same_in_any_pieces(bad);
            assert_eq!(
                (refused, state),
                (None, State::Lost),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let (mut framing, _) = watch();
        framing.read(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX");
        framing.read(GET);
        assert_eq!(framing.heads, 1, "nothing is read once lost");
    }

    #[test]
    fn a_head_past_the_limits_ends_the_watch_and_keeps_at_most_the_limit() {
        let (mut framing, _) = Framing::new(100, 100);
        framing.read(b"GET / HTTP/1.1\r\n");
        for _ in 0..50 {
            framing.read(b"X-Long: aaaaaaaaaa\r\n");
        }
        assert_eq!(framing.state, State::Lost);
        assert!(framing.partial.capacity() <= 4 * 101);
        let (mut framing, _) = Framing::new(64 * 1024, 2);
        framing.read(b"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n");
        assert_eq!(framing.state, State::Lost, "more headers than hyper takes");
        let (mut framing, _) = Framing::new(64 * 1024, 300);
        let many: String = (0..250).map(|i| format!("H{i}: v\r\n")).collect();
        framing.read(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes());
        assert_eq!((framing.heads, framing.state), (1, State::Head));
    }

    #[test]
    fn a_head_that_ends_in_a_read_carrying_more_than_the_limit_is_still_read() {
        // A head in two reads, the second carrying the head's end and then more than the head
        // limit of other bytes: the head is read (and refused), not given up on for the size
        // of the read.
        let head =
            "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nX: aaa\r\n\r\n";
        assert!(head.len() < 100);
        let (mut framing, verdict) = Framing::new(100, 100);
        framing.read(&head.as_bytes()[..40]);
        let mut rest = head.as_bytes()[40..].to_vec();
        rest.extend_from_slice(b"0\r\n\r\n");
        rest.extend_from_slice(&[b'\n'; 300]);
        framing.read(&rest);
        assert!(verdict.refuses(0), "the ambiguous head was seen");
        assert_eq!(framing.heads, 1);
        // A head still incomplete past the limit is given up on, as hyper refuses it.
        let (mut framing, _) = Framing::new(100, 100);
        framing.read(b"GET / HTTP/1.1\r\n");
        framing.read(&[b'a'; 300]);
        assert_eq!(framing.state, State::Lost);
    }

    #[test]
    fn a_head_sent_a_byte_at_a_time_is_parsed_once_it_has_ended() {
        let mut head = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..90 {
            head.extend_from_slice(format!("X-Header-{i}: {}\r\n", "v".repeat(600)).as_bytes());
        }
        head.extend_from_slice(b"\r\n");
        assert!(head.len() > 50_000 && head.len() < 64 * 1024);
        let (mut framing, _) = watch();
        for byte in &head {
            framing.read(std::slice::from_ref(byte));
        }
        assert_eq!((framing.heads, framing.state), (1, State::Head));
        // The first read, and the one that ended it: not one parse per byte (quadratic).
        assert_eq!(framing.parses, 2);
    }

    #[test]
    fn huge_lengths_and_chunk_sizes_are_followed_or_refused_without_overflow() {
        let (mut framing, _) = watch();
        framing.read(b"POST / HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\nabc");
        assert_eq!(framing.state, State::Length(u64::MAX - 3));
        let (_, _, state) = follow(
            b"POST / HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n",
            64,
        );
        assert_eq!(state, State::Lost);
        let (_, _, state) = follow(
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n",
            64,
        );
        assert_eq!(state, State::Lost);
    }
}
