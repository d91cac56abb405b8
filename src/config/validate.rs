//! Checks of single settings, shared by the builder.

use super::MAX_ROOM_ID_LEN;

pub(crate) fn valid_room_id(room: &str) -> bool {
    !room.is_empty()
        && room.len() <= MAX_ROOM_ID_LEN
        && room
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

pub(crate) fn valid_path_prefix(prefix: &str) -> bool {
    prefix.len() > 1
        && prefix.starts_with('/')
        && !prefix.ends_with('/')
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-_.~".contains(&b))
}

/// Cookie names are RFC 6265 tokens (long enough for `wr_` + the longest room id + `_q`).
pub(crate) fn valid_cookie_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Path and domain attribute values: visible ASCII without `;` or `,`.
pub(crate) fn valid_cookie_attr(value: &str) -> bool {
    !value.is_empty()
        && value
            .bytes()
            .all(|b| (0x21..0x7f).contains(&b) && b != b';' && b != b',')
}
