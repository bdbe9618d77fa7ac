//! Fuzzes the packet layer's entry point: any frame, under several configurations, must give
//! exactly one verdict without panicking, the same one as the general parser alone, and a
//! measured frame must be self-consistent. The second byte turns the encapsulation walks on
//! and off and sets the depth limit, so stacked tunnels are fuzzed too.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wirelat_dataplane::packet::inspect::measure_general;
use wirelat_dataplane::packet::{EncapKind, Inspection, PacketConfig, PacketCounters, inspect, measure};

fuzz_target!(|data: &[u8]| {
    // The first two bytes pick the configuration, the rest is the frame.
    let Some((&[knobs, walks], frame)) = data.split_first_chunk::<2>() else { return };
    let mut cfg = PacketConfig::default();
    cfg.payload_prefix_bytes = usize::from(knobs & 0x7f);
    cfg.classify.tcp_data = knobs & 0x80 != 0;
    cfg.classify.dns_ports = vec![53, u16::from(knobs) | 1];
    cfg.identity_seed = u64::from(knobs);
    let e = &mut cfg.encap;
    // Default walks when bit 7 is clear, so the common corpus entries keep their meaning.
    if walks & 0x80 != 0 {
        (e.vlan, e.mpls, e.pppoe) = (walks & 1 != 0, walks & 2 != 0, walks & 4 != 0);
        e.mpls_control_word = walks & 8 != 0;
    }
    (e.gre, e.vxlan, e.gtpu, e.ip_in_ip) = (walks & 16 != 0, walks & 32 != 0, walks & 64 != 0, walks & 0x90 == 0x90);
    e.vxlan_ports = vec![4789, u16::from(knobs) | 1];
    e.max_depth = 1 + (knobs >> 4);

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
        // A measured frame carries the identifier of a walked layer only.
        let walked = |k| match k {
            EncapKind::None => true,
            EncapKind::Vlan => cfg.encap.vlan,
            EncapKind::Mpls => cfg.encap.mpls,
            EncapKind::Pppoe => cfg.encap.pppoe,
            EncapKind::Gre => cfg.encap.gre,
            EncapKind::Vxlan => cfg.encap.vxlan,
            EncapKind::Gtpu => cfg.encap.gtpu,
        };
        assert!(walked(m.encap.kind), "{:?}", m.encap);
    }
});
