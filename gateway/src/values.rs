//! Header values written in place: on the stack, then copied once into the value's own bytes.

use std::io::{Cursor, Write};

use http::HeaderValue;

/// A header value written by `write`: into a buffer on the stack (or a vector, past its
/// size), then into the value's own bytes, one allocation in all. `None` if it is not a valid
/// header value.
pub(crate) fn written(
    write: impl Fn(&mut dyn Write) -> std::io::Result<()>,
) -> Option<HeaderValue> {
    let mut stack = [0u8; 160];
    let mut cursor = Cursor::new(&mut stack[..]);
    if write(&mut cursor).is_ok() {
        let len = usize::try_from(cursor.position()).unwrap_or(0);
        return HeaderValue::from_bytes(&stack[..len]).ok();
    }
    let mut heap = Vec::new();
    write(&mut heap).ok()?;
    HeaderValue::from_bytes(&heap).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_values_are_written_whole_and_bad_ones_refused() {
        let ip = std::net::Ipv4Addr::new(203, 0, 113, 9);
        let short = written(|w| write!(w, "for={ip}")).unwrap();
        assert_eq!(short, "for=203.0.113.9");
        let long = "a".repeat(1000);
        assert_eq!(
            written(|w| w.write_all(long.as_bytes())).unwrap(),
            long.as_str()
        );
        assert!(written(|w| w.write_all(b"line\nbreak")).is_none());
    }
}
