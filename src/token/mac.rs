//! The MAC of every signed value: HMAC-SHA256, with the key's inner and outer states hashed
//! once, when the key is made.
//!
//! RustCrypto's `hmac` over `sha2` rather than `ring::hmac`: the same function (a test checks
//! every length against `ring`), but `ring`'s signing sets up and dispatches a digest context
//! per call, about 100 ns of a first visit's cookie beside the 45 ns each SHA-256 block costs
//! with the CPU's SHA extensions (`bench --micro`, `token_sign_ns`). A first visit signs one
//! value and a waiting poll verifies one, so that is paid on most of a sale's requests.

use hmac::{Hmac, Mac as _};
use sha2::Sha256;

/// Length of a tag, in bytes.
pub(crate) const TAG_LEN: usize = 32;

/// An HMAC-SHA256 key, its two padded states prepared once. Never printed: the states stand for
/// the secret (anyone holding them signs as it does).
#[derive(Clone)]
pub(crate) struct MacKey(Hmac<Sha256>);

impl MacKey {
    pub(crate) fn new(secret: &[u8]) -> Self {
        Self(Hmac::new_from_slice(secret).expect("HMAC takes a key of any length"))
    }

    /// The tag of `message`.
    pub(crate) fn sign(&self, message: &[u8]) -> [u8; TAG_LEN] {
        let mut mac = self.0.clone();
        mac.update(message);
        mac.finalize().into_bytes().into()
    }

    /// Whether `tag` is `message`'s tag, compared in constant time.
    pub(crate) fn verify(&self, message: &[u8], tag: &[u8]) -> bool {
        let mut mac = self.0.clone();
        mac.update(message);
        mac.verify_slice(tag).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::hmac;

    /// The very function `ring` computes, for keys and messages of every length around SHA-256's
    /// block (keys longer than a block are hashed first; messages end in one or two blocks).
    #[test]
    fn the_tag_is_ring_s_hmac_sha256() {
        for key_len in [32, 33, 63, 64, 65, 100] {
            let secret: Vec<u8> = (0..key_len).map(|i| (i * 7 + 1) as u8).collect();
            let ours = MacKey::new(&secret);
            let theirs = hmac::Key::new(hmac::HMAC_SHA256, &secret);
            for len in 0..200 {
                let message: Vec<u8> = (0..len).map(|i| (i * 13 + key_len) as u8).collect();
                let tag = ours.sign(&message);
                assert_eq!(tag.as_slice(), hmac::sign(&theirs, &message).as_ref());
                assert!(ours.verify(&message, &tag));
            }
        }
    }

    #[test]
    fn any_other_tag_or_message_fails() {
        let key = MacKey::new(&[9u8; 32]);
        let tag = key.sign(b"twr|q1|main");
        for i in 0..TAG_LEN {
            let mut bad = tag;
            bad[i] ^= 1;
            assert!(!key.verify(b"twr|q1|main", &bad));
        }
        assert!(!key.verify(b"twr|q1|mail", &tag));
        assert!(!key.verify(b"twr|q1|main", &tag[..TAG_LEN - 1]));
        assert!(!key.verify(b"twr|q1|main", &[]));
        assert!(!MacKey::new(&[8u8; 32]).verify(b"twr|q1|main", &tag));
    }
}
