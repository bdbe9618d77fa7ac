//! Authentication of the peer protocol: a pre-shared key, a per-connection session key from
//! both sides' nonces, and an HMAC-SHA256 tag on every frame with a per-direction sequence
//! number.
//!
//! ```text
//! point → peer   ClientHello(nonce_c)                 tag = HMAC(PSK, "wirelat client hello" ‖ frame)
//! peer → point   ServerHello(nonce_s)                 tag = HMAC(K, 1 ‖ seq 0 ‖ frame)
//! point → peer   Hello(point, fingerprints, …)        tag = HMAC(K, 0 ‖ seq 0 ‖ frame)
//! …              every later frame                    tag = HMAC(K, dir ‖ seq ‖ frame)
//!
//! K = HMAC-SHA256(PSK, "wirelat session v1" ‖ nonce_c ‖ nonce_s)
//! ```
//!
//! The peer's `ServerHello` tag proves to the point that the peer knows the key; the point's
//! `Hello` tag proves it to the peer. A frame recorded on one connection does not verify on
//! another (another K), nor twice or out of order on the same one (the sequence number), nor
//! in the other direction (the direction byte). Frames are not encrypted: synopses are
//! aggregates, and confidentiality was not asked for.
//!
//! The key file holds the key in hex (at least 16 bytes, 32 recommended; whitespace ignored).
//! Nothing here does network I/O.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Bytes of a frame's tag.
pub const TAG_LEN: usize = 32;
/// Shortest key accepted.
pub const MIN_KEY_BYTES: usize = 16;
/// Longest key accepted.
const MAX_KEY_BYTES: usize = 1024;

type HmacSha256 = Hmac<Sha256>;

/// A key could not be loaded.
#[derive(Debug, Error)]
pub enum KeyError {
    /// The file could not be read.
    #[error("cannot read key file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file does not hold a hex key of an acceptable length.
    #[error("key file {}: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// A frame did not authenticate.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[error("bad message authentication tag (wrong key, replayed, reordered or altered frame)")]
pub struct BadTag;

/// The pre-shared key.
#[derive(Clone)]
pub struct PreSharedKey(Vec<u8>);

impl std::fmt::Debug for PreSharedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PreSharedKey({} bytes)", self.0.len())
    }
}

impl PreSharedKey {
    /// A key from raw bytes (at least [`MIN_KEY_BYTES`]).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() < MIN_KEY_BYTES {
            return Err(format!("the key has {} bytes, at least {MIN_KEY_BYTES} are needed", bytes.len()));
        }
        if bytes.len() > MAX_KEY_BYTES {
            return Err(format!("the key has {} bytes, at most {MAX_KEY_BYTES} are accepted", bytes.len()));
        }
        Ok(Self(bytes.to_vec()))
    }

    /// Parses hex text (whitespace ignored).
    pub fn from_hex(text: &str) -> Result<Self, String> {
        let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        if !digits.len().is_multiple_of(2) {
            return Err("odd number of hex digits".into());
        }
        let mut bytes = Vec::with_capacity(digits.len() / 2);
        for pair in digits.chunks_exact(2) {
            let hi = hex_value(pair[0]).ok_or("not a hex digit")?;
            let lo = hex_value(pair[1]).ok_or("not a hex digit")?;
            bytes.push(hi << 4 | lo);
        }
        Self::from_bytes(&bytes)
    }

    /// Loads the hex key file at `path`. Warns (log) when the file is readable by others.
    pub fn load(path: &Path) -> Result<Self, KeyError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| KeyError::Read { path: path.to_path_buf(), source })?;
        warn_if_readable_by_others(path);
        Self::from_hex(&text).map_err(|reason| KeyError::Invalid { path: path.to_path_buf(), reason })
    }
}

#[cfg(unix)]
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(file = %path.display(), "key file is accessible by group or others; chmod 600 it");
    }
}

#[cfg(not(unix))]
fn warn_if_readable_by_others(_path: &Path) {}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn mac_with(key: &[u8]) -> HmacSha256 {
    match HmacSha256::new_from_slice(key) {
        Ok(m) => m,
        // HMAC accepts keys of every length; this arm only keeps the code panic-free.
        Err(_) => <HmacSha256 as KeyInit>::new(&Default::default()),
    }
}

const CLIENT_HELLO_LABEL: &[u8] = b"wirelat client hello";
const SESSION_LABEL: &[u8] = b"wirelat session v1";

/// The tag of a `ClientHello` frame (under the pre-shared key: there is no session yet).
pub fn client_hello_tag(psk: &PreSharedKey, frame: &[u8]) -> [u8; TAG_LEN] {
    let mut m = mac_with(&psk.0);
    m.update(CLIENT_HELLO_LABEL);
    m.update(frame);
    m.finalize().into_bytes().into()
}

/// Checks a `ClientHello` tag (constant time).
pub fn verify_client_hello(psk: &PreSharedKey, frame: &[u8], tag: &[u8]) -> Result<(), BadTag> {
    let mut m = mac_with(&psk.0);
    m.update(CLIENT_HELLO_LABEL);
    m.update(frame);
    m.verify_slice(tag).map_err(|_| BadTag)
}

/// Which end of a connection frames come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Point → peer.
    FromPoint = 0,
    /// Peer → point.
    FromPeer = 1,
}

/// The session key of one connection.
#[derive(Clone)]
pub struct SessionKey([u8; 32]);

impl SessionKey {
    /// K = HMAC(PSK, label ‖ nonce_c ‖ nonce_s).
    pub fn derive(psk: &PreSharedKey, client_nonce: &[u8], server_nonce: &[u8]) -> Self {
        let mut m = mac_with(&psk.0);
        m.update(SESSION_LABEL);
        m.update(client_nonce);
        m.update(server_nonce);
        Self(m.finalize().into_bytes().into())
    }

    /// The sealing half for frames sent in `dir`.
    pub fn sealer(&self, dir: Direction) -> Sealer {
        Sealer { key: self.clone(), dir, seq: 0 }
    }

    /// The verifying half for frames received from `dir`.
    pub fn opener(&self, dir: Direction) -> Opener {
        Opener { key: self.clone(), dir, seq: 0 }
    }

    fn tag(&self, dir: Direction, seq: u64, frame: &[u8]) -> HmacSha256 {
        let mut m = mac_with(&self.0);
        m.update(&[dir as u8]);
        m.update(&seq.to_le_bytes());
        m.update(frame);
        m
    }
}

/// Tags outgoing frames of one direction of one connection, numbering them.
pub struct Sealer {
    key: SessionKey,
    dir: Direction,
    seq: u64,
}

impl Sealer {
    /// The tag of the next frame.
    pub fn seal(&mut self, frame: &[u8]) -> [u8; TAG_LEN] {
        let t = self.key.tag(self.dir, self.seq, frame).finalize().into_bytes().into();
        self.seq += 1;
        t
    }
}

/// Verifies incoming frames of one direction of one connection, in order.
pub struct Opener {
    key: SessionKey,
    dir: Direction,
    seq: u64,
}

impl Opener {
    /// Checks the next frame's tag (constant time). A failure leaves the sequence unchanged;
    /// the connection must then be closed.
    pub fn open(&mut self, frame: &[u8], tag: &[u8]) -> Result<(), BadTag> {
        self.key.tag(self.dir, self.seq, frame).verify_slice(tag).map_err(|_| BadTag)?;
        self.seq += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn psk(b: u8) -> PreSharedKey {
        PreSharedKey::from_bytes(&[b; 32]).unwrap()
    }

    #[test]
    fn hex_keys_load_and_short_or_bad_keys_are_refused() {
        let k = PreSharedKey::from_hex("00112233445566778899aabbccddeeff\n").unwrap();
        assert_eq!(k.0.len(), 16);
        assert!(PreSharedKey::from_hex("0011").unwrap_err().contains("at least 16"));
        assert!(PreSharedKey::from_hex("zz".repeat(16).as_str()).is_err());
        assert!(PreSharedKey::from_hex("abc").is_err());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        std::fs::write(&p, "ab".repeat(32)).unwrap();
        assert_eq!(PreSharedKey::load(&p).unwrap().0, vec![0xab; 32]);
        assert!(matches!(PreSharedKey::load(&dir.path().join("none")), Err(KeyError::Read { .. })));
    }

    #[test]
    fn frames_verify_only_in_order_on_their_own_connection_and_direction() {
        let k = SessionKey::derive(&psk(1), &[1; 32], &[2; 32]);
        let mut tx = k.sealer(Direction::FromPoint);
        let mut rx = k.opener(Direction::FromPoint);
        let t0 = tx.seal(b"frame 0");
        let t1 = tx.seal(b"frame 1");
        // Out of order (replay of a later frame first) fails and does not advance.
        assert_eq!(rx.open(b"frame 1", &t1), Err(BadTag));
        rx.open(b"frame 0", &t0).unwrap();
        // Replaying frame 0 fails.
        assert_eq!(rx.open(b"frame 0", &t0), Err(BadTag));
        rx.open(b"frame 1", &t1).unwrap();
        // Another connection (other nonce) or the other direction does not verify.
        let other = SessionKey::derive(&psk(1), &[1; 32], &[3; 32]);
        assert_eq!(other.opener(Direction::FromPoint).open(b"frame 0", &t0), Err(BadTag));
        assert_eq!(k.opener(Direction::FromPeer).open(b"frame 0", &t0), Err(BadTag));
        // A wrong key does not verify.
        let wrong = SessionKey::derive(&psk(9), &[1; 32], &[2; 32]);
        assert_eq!(wrong.opener(Direction::FromPoint).open(b"frame 0", &t0), Err(BadTag));
        // An altered frame does not verify.
        let mut rx = k.opener(Direction::FromPoint);
        assert_eq!(rx.open(b"frame O", &t0), Err(BadTag));
    }

    #[test]
    fn client_hello_tags_depend_on_the_key() {
        let t = client_hello_tag(&psk(1), b"hello");
        verify_client_hello(&psk(1), b"hello", &t).unwrap();
        assert_eq!(verify_client_hello(&psk(2), b"hello", &t), Err(BadTag));
        assert_eq!(verify_client_hello(&psk(1), b"hellO", &t), Err(BadTag));
        assert_eq!(verify_client_hello(&psk(1), b"hello", &t[..5]), Err(BadTag));
    }
}
