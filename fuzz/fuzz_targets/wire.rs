//! Fuzzes the peer protocol's decoders: any byte string as a frame off the wire, any body
//! behind any well-formed header (past the checksum, which a fuzzer cannot forge), and any
//! synopsis encoding through the collector's decoders. None may panic; a body that decodes
//! must encode back to a frame that decodes to the same message.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use wirelat_control::peer::estimate::decode;
use wirelat_control::synopses::SynopsesConfig;
use wirelat_control::wire::{HEADER_LEN, Header, Message};
use wirelat_dataplane::synopsis::SynopsisKind;
use wirelat_dataplane::synopsis::colate::ColateConfig;
use wirelat_dataplane::synopsis::fridge::FridgeConfig;
use wirelat_dataplane::synopsis::lda::LdaConfig;
use wirelat_dataplane::synopsis::lds::LdsConfig;
use wirelat_dataplane::synopsis::rda::RdaConfig;

/// The receiver's body cap.
const CAP: u32 = 1 << 16;

fn synopses() -> &'static SynopsesConfig {
    static CFG: OnceLock<SynopsesConfig> = OnceLock::new();
    CFG.get_or_init(|| SynopsesConfig {
        fridge: Some(FridgeConfig::default()),
        lda: Some(LdaConfig::single_bank(64, 1.0, 1)),
        lds: Some(LdsConfig { flow_capacity: 16, ..LdsConfig::new(2, 64) }),
        rda: Some(RdaConfig::online(2, 64, 1024)),
        colate: Some(ColateConfig::new(1009, 8, 32, 1 << 40)),
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    // A frame as it comes off the wire (header checks, length cap, checksum, body).
    let _ = Message::decode(rest, CAP);
    // The body parsers behind any header that parses.
    if let Ok(h) = Header::parse(rest, CAP) {
        let body = rest.get(HEADER_LEN..).unwrap_or_default();
        if let Ok(m) = Message::decode_body(&h, body) {
            assert_eq!(Message::decode(&m.encode(), u32::MAX).as_ref(), Ok(&m));
        }
    }
    // Synopsis encodings, as an epoch frame's body carries them.
    if let Some(kind) = SynopsisKind::from_u8(mode % 6) {
        let _ = decode(synopses(), kind, rest);
    }
});
