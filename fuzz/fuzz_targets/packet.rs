//! Fuzzes the packet layer's entry point: any frame, under several configurations, must give
//! exactly one verdict without panicking, the same one as the general parser alone, and a
//! measured frame must be self-consistent.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wirelat_dataplane::packet::inspect::measure_general;
use wirelat_dataplane::packet::{Inspection, PacketConfig, PacketCounters, inspect, measure};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the configuration, the rest is the frame.
    let Some((&knobs, frame)) = data.split_first() else { return };
    let mut cfg = PacketConfig::default();
    cfg.payload_prefix_bytes = usize::from(knobs & 0x7f);
    cfg.classify.tcp_data = knobs & 0x80 != 0;
    cfg.classify.dns_ports = vec![53, u16::from(knobs) | 1];
    cfg.identity_seed = u64::from(knobs);

    let mut counters = PacketCounters::default();
    let verdict = inspect(frame, &cfg, &mut counters);
    assert_eq!(counters.total(), 1);
    assert_eq!(measure(frame, &cfg).ok(), verdict.measurement().copied());
    // The fast paths for the common shapes give exactly the general parser's answer.
    assert_eq!(measure(frame, &cfg), measure_general(frame, &cfg));
    if let Inspection::Measured(m) = verdict {
        assert_eq!(m.flow_hash, m.flow.hash(cfg.identity_seed));
        assert!(m.flow.ip_version == 4 || m.flow.ip_version == 6);
        let _ = m.observation(0);
    }
});
