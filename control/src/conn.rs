//! An authenticated frame connection over TCP: the handshake of [`crate::auth`] on both ends,
//! then a reader and a writer half that carry [`Message`]s, each frame followed by its tag.
//!
//! A frame is read in order: header (refused at once if its length is over the cap), body,
//! tag; the tag is verified before the checksum and the body are looked at. Every failure is
//! a [`ConnError`] with a short [`ConnError::reason`]; the caller closes the connection.

use crate::auth::{self, BadTag, Direction, Opener, PreSharedKey, Sealer, SessionKey, TAG_LEN};
use crate::wire::{HEADER_LEN, Header, Hello, Message, MessageType, NONCE_LEN, WireError};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;
use thiserror::Error;

/// Cap on the body of handshake frames (nonces and a hello are far smaller).
const HANDSHAKE_MAX_BODY: u32 = 1024;

/// Why a connection failed.
#[derive(Debug, Error)]
pub enum ConnError {
    /// The socket failed.
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    /// The other end closed the connection between frames.
    #[error("connection closed")]
    Closed,
    /// A frame was malformed.
    #[error("{0}")]
    Wire(#[from] WireError),
    /// A frame's tag did not verify.
    #[error("{0}")]
    Auth(#[from] BadTag),
    /// A well-formed frame that does not belong here.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// The other end refused the connection.
    #[error("refused by the other end: {0}")]
    Rejected(String),
}

impl ConnError {
    /// A short stable name for counters and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            ConnError::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof => "truncated",
            ConnError::Io(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                "timeout"
            }
            ConnError::Io(_) => "io",
            ConnError::Closed => "closed",
            ConnError::Wire(w) => w.reason(),
            ConnError::Auth(_) => "bad_mac",
            ConnError::Protocol(_) => "protocol",
            ConnError::Rejected(_) => "rejected",
        }
    }
}

/// A frame as read: its header, its bytes (header and body) and the tag that followed it.
type RawFrame = (Header, Vec<u8>, [u8; TAG_LEN]);

/// Reads one frame and its tag. `Ok(None)` on a clean end of stream before the frame.
fn read_raw(stream: &mut impl Read, max_body: u32) -> Result<Option<RawFrame>, ConnError> {
    let mut frame = vec![0u8; HEADER_LEN];
    // The first byte tells a clean close from a truncated frame.
    let Some(first) = frame.first_mut() else { return Err(ConnError::Closed) };
    loop {
        match stream.read(std::slice::from_mut(first)) {
            Ok(0) => return Ok(None),
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        }
    }
    stream.read_exact(frame.get_mut(1..).unwrap_or_default())?;
    let header = Header::parse(&frame, max_body)?;
    frame.resize(HEADER_LEN + header.body_len as usize, 0);
    stream.read_exact(frame.get_mut(HEADER_LEN..).unwrap_or_default())?;
    let mut tag = [0u8; TAG_LEN];
    stream.read_exact(&mut tag)?;
    Ok(Some((header, frame, tag)))
}

fn parse(header: &Header, frame: &[u8]) -> Result<Message, ConnError> {
    let (head, body) = frame.split_at(HEADER_LEN.min(frame.len()));
    Ok(Message::from_parts(header, head, body)?)
}

/// The receiving half of a connection.
pub struct FrameReader {
    stream: TcpStream,
    opener: Opener,
    max_body: u32,
}

impl FrameReader {
    /// The next message. `Err(ConnError::Closed)` when the other end closed cleanly.
    pub fn read(&mut self) -> Result<Message, ConnError> {
        let (header, frame, tag) = read_raw(&mut self.stream, self.max_body)?.ok_or(ConnError::Closed)?;
        self.opener.open(&frame, &tag)?;
        parse(&header, &frame)
    }

    /// Sets the read timeout (`None`: block).
    pub fn set_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.stream.set_read_timeout(t)
    }
}

/// The sending half of a connection.
pub struct FrameWriter {
    stream: TcpStream,
    sealer: Sealer,
    peer: Option<SocketAddr>,
}

impl FrameWriter {
    /// Sends one message.
    pub fn send(&mut self, m: &Message) -> io::Result<()> {
        self.send_frame(&m.encode())
    }

    /// Sends an encoded frame (`Message::encode` output).
    pub fn send_frame(&mut self, frame: &[u8]) -> io::Result<()> {
        let tag = self.sealer.seal(frame);
        self.stream.write_all(frame)?;
        self.stream.write_all(&tag)?;
        self.stream.flush()
    }

    /// Closes both directions: a reader blocked on this connection returns.
    pub fn shutdown(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    /// The other end's address.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// Sets the write timeout (a stalled other end cannot block a sender forever).
    pub fn set_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.stream.set_write_timeout(t)
    }
}

fn halves(
    stream: TcpStream,
    key: &SessionKey,
    mine: Direction,
    max_body: u32,
) -> io::Result<(FrameReader, FrameWriter)> {
    let theirs = match mine {
        Direction::FromPoint => Direction::FromPeer,
        Direction::FromPeer => Direction::FromPoint,
    };
    let peer = stream.peer_addr().ok();
    let w = stream.try_clone()?;
    Ok((
        FrameReader { stream, opener: key.opener(theirs), max_body },
        FrameWriter { stream: w, sealer: key.sealer(mine), peer },
    ))
}

/// The point's side of the handshake on a connected stream: sends `hello` once both ends
/// have proved they hold `psk`. Returns the two halves; the peer may still answer `Reject`.
pub fn client_handshake(
    mut stream: TcpStream,
    psk: &PreSharedKey,
    hello: &Hello,
    max_body: u32,
    timeout: Duration,
) -> Result<(FrameReader, FrameWriter), ConnError> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let nonce_c: [u8; NONCE_LEN] = rand::random();
    let ch = Message::ClientHello { nonce: nonce_c }.encode();
    stream.write_all(&ch)?;
    stream.write_all(&auth::client_hello_tag(psk, &ch))?;
    stream.flush()?;
    let Some((header, frame, tag)) = read_raw(&mut stream, HANDSHAKE_MAX_BODY)? else {
        return Err(ConnError::Rejected(
            "the peer closed the connection during the handshake (wrong key, or not a wirelat peer?)".into(),
        ));
    };
    if header.msg_type != MessageType::ServerHello {
        return Err(ConnError::Protocol(format!("expected server_hello, got {}", header.msg_type.name())));
    }
    let Message::ServerHello { nonce: nonce_s } = parse(&header, &frame)? else {
        return Err(ConnError::Protocol("server_hello without a nonce".into()));
    };
    let key = SessionKey::derive(psk, &nonce_c, &nonce_s);
    let (mut r, mut w) = halves(stream, &key, Direction::FromPoint, max_body)?;
    // The server hello is the peer's frame 0: its tag proves the peer holds the key.
    r.opener.open(&frame, &tag)?;
    w.send(&Message::Hello(hello.clone()))?;
    r.set_timeout(None)?;
    Ok((r, w))
}

/// The peer's side of the handshake on an accepted stream: returns the point's hello and the
/// two halves. A client without the key fails here with `bad_mac`.
pub fn server_handshake(
    mut stream: TcpStream,
    psk: &PreSharedKey,
    max_body: u32,
    timeout: Duration,
) -> Result<(Hello, FrameReader, FrameWriter), ConnError> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let (header, frame, tag) = read_raw(&mut stream, HANDSHAKE_MAX_BODY)?.ok_or(ConnError::Closed)?;
    if header.msg_type != MessageType::ClientHello {
        return Err(ConnError::Protocol(format!("expected client_hello, got {}", header.msg_type.name())));
    }
    auth::verify_client_hello(psk, &frame, &tag)?;
    let Message::ClientHello { nonce: nonce_c } = parse(&header, &frame)? else {
        return Err(ConnError::Protocol("client_hello without a nonce".into()));
    };
    let nonce_s: [u8; NONCE_LEN] = rand::random();
    let key = SessionKey::derive(psk, &nonce_c, &nonce_s);
    let (mut r, mut w) = halves(stream, &key, Direction::FromPeer, max_body)?;
    w.send(&Message::ServerHello { nonce: nonce_s })?;
    let hello = match r.read()? {
        Message::Hello(h) => h,
        Message::Reject { reason } => return Err(ConnError::Rejected(reason)),
        other => {
            return Err(ConnError::Protocol(format!("expected hello, got {}", other.msg_type().name())));
        }
    };
    r.set_timeout(None)?;
    Ok((hello, r, w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use wirelat_dataplane::synopsis::SynopsisKind;

    fn psk(b: u8) -> PreSharedKey {
        PreSharedKey::from_bytes(&[b; 32]).unwrap()
    }

    fn hello() -> Hello {
        Hello { point: 4, watermark: 7, packet_identity: 3, fingerprints: vec![(SynopsisKind::Lda, 11)] }
    }

    #[test]
    fn handshake_then_frames_both_ways() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let (h, mut r, mut w) = server_handshake(s, &psk(1), 1 << 20, Duration::from_secs(5)).unwrap();
            assert_eq!(h, hello());
            let m = r.read().unwrap();
            w.send(&Message::Reject { reason: "bye".into() }).unwrap();
            m
        });
        let s = TcpStream::connect(addr).unwrap();
        let (mut r, mut w) = client_handshake(s, &psk(1), &hello(), 1 << 20, Duration::from_secs(5)).unwrap();
        let p = Message::Progress { point: 4, watermark: 9, given_up: vec![] };
        w.send(&p).unwrap();
        assert_eq!(r.read().unwrap(), Message::Reject { reason: "bye".into() });
        assert_eq!(server.join().unwrap(), p);
    }

    #[test]
    fn wrong_keys_fail_on_both_ends() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            server_handshake(s, &psk(1), 1 << 20, Duration::from_secs(5)).err().unwrap().reason()
        });
        let s = TcpStream::connect(addr).unwrap();
        let e = client_handshake(s, &psk(2), &hello(), 1 << 20, Duration::from_secs(5)).err().unwrap();
        assert_eq!(server.join().unwrap(), "bad_mac");
        assert!(matches!(e, ConnError::Rejected(_) | ConnError::Io(_)), "{e}");
    }
}
