use super::*;
use wirelat_dataplane::pipeline::OverrunPolicy;

const MINIMAL: &str = r#"
[[port]]
device = "net_pcap0,rx_pcap=in.pcap,tx_pcap=out0.pcap"
[[port]]
device = "net_pcap1,tx_pcap=out1.pcap"
"#;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("test.toml"))
}

fn error_text(text: &str) -> String {
    match parse(text) {
        Ok(c) => panic!("expected an error, parsed {c:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn minimal_config_gets_every_default() {
    let c = parse(MINIMAL).expect("minimal config parses");
    assert_eq!(c.workers.cores, None);
    assert_eq!(c.queues(), 1);
    assert_eq!(*c.workers.burst_size.get_ref(), 32);
    assert_eq!(c.workers.tx_retry_limit, 64);
    assert_eq!(c.eal.main_core, None);
    assert_eq!(c.point_ids(), PointIds { point: 1, forward_segment: 1, reverse_segment: 2 });
    assert_eq!(c.epochs.length_ns(), 1_000_000_000);
    assert_eq!(c.epochs.overrun, OverrunPolicy::Skip);
    assert_eq!(c.clock.source, ClockSource::Tsc);
    assert!(c.synopses_config().is_empty());
    assert_eq!(c.packet_config(), PacketConfig::default());
    assert_eq!(c.stats.interval_ms, 1000);
    assert_eq!(c.stop, StopConfig { idle_ms: 0, after_ms: 0 });
    assert_eq!(*c.mempool.data_room_bytes.get_ref(), 2176);
    let p = &c.ports.get_ref()[0];
    assert!(p.promiscuous && p.rx_timestamp);
    assert_eq!(*p.mtu.get_ref(), 9000);
    assert_eq!(*p.rx_descriptors.get_ref(), 1024);
    // 2 ports * 1 queue * 2048 descriptors + 2 caches * 256 + 128 burst slots + 1024 slack
    // = 5760 -> next 2^k - 1 is 8191.
    assert_eq!(c.mempool_mbufs(), 8191);
}

#[test]
fn eal_args_map_lcores_and_devices() {
    let text = r#"
[eal]
args = ["--no-huge", "-m", "512"]
main_core = 1
[workers]
cores = [0, 1]
[[port]]
device = "net_ring0"
[[port]]
device = "3b:00.1,rxq_cqe_comp_en=0"
"#;
    let c = parse(text).expect("valid");
    let plan = CorePlan::from_overrides(&c).expect("both given");
    assert_eq!(
        c.eal_args(&plan),
        vec![
            "--no-huge",
            "-m",
            "512",
            "--lcores=0@1,1@0,2@1",
            "--main-lcore=0",
            "--vdev=net_ring0",
            "-a",
            "3b:00.1,rxq_cqe_comp_en=0"
        ]
    );
    assert_eq!(c.ports.get_ref()[1].device_name(), "0000:3b:00.1");
    assert_eq!(c.ports.get_ref()[1].device_kind(), DeviceKind::Pci);
    assert_eq!(c.ports.get_ref()[0].device_name(), "net_ring0");
    assert_eq!(c.queues(), 2);
}

#[test]
fn pci_addresses_are_recognised() {
    assert!(is_pci_address("0000:3b:00.1"));
    assert!(is_pci_address("3b:00.7"));
    assert!(!is_pci_address("net_pcap0"));
    assert!(!is_pci_address("3b:00.10"));
    assert!(!is_pci_address("zz:00.1"));
}

#[test]
fn unknown_key_is_named_with_line_and_column() {
    let text = format!("{MINIMAL}[workers]\ncores = [1]\nburst = 8\n");
    let e = error_text(&text);
    assert!(e.starts_with("test.toml:8:1: key `workers.burst`"), "{e}");
    assert!(e.contains("unknown field `burst`"), "{e}");
}

#[test]
fn port_refusals_name_the_refused_keys_location() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("r.toml");
    let text = "[workers]\ncount = 1\n[[port]]\ndevice = \"net_af_xdp0,iface=a\"\nmtu = 9000\n\
                    [[port]]\ndevice = \"net_af_xdp1,iface=b\"\n";
    std::fs::write(&path, text).expect("config");
    let c = Config::parse(text, &path).expect("valid");
    let at = |index, key| c.port_refusal(&path, index, key, "refused".into()).to_string();
    let p = path.display();
    assert_eq!(at(0, PortKey::Mtu), format!("{p}:5:7: key `port[0].mtu`: refused"));
    // No `mtu` written: the interface's own MTU was refused, located at the device.
    assert_eq!(at(1, PortKey::Mtu), format!("{p}:7:10: key `port[1].device`: refused"));
    assert_eq!(at(1, PortKey::Device), format!("{p}:7:10: key `port[1].device`: refused"));
    assert_eq!(at(0, PortKey::Queues), format!("{p}:2:9: key `workers.count`: refused"));
}

#[test]
fn unknown_key_in_second_port_names_its_index() {
    let text = format!("{MINIMAL}speed = 10\n");
    let e = error_text(&text);
    assert!(e.contains("key `port[1].speed`"), "{e}");
    assert!(e.contains(":6:1:"), "{e}");
}

#[test]
fn syntax_error_names_line() {
    let e = error_text("[workers\ncores = [1]\n");
    assert!(e.starts_with("test.toml:1:"), "{e}");
}

#[test]
fn wrong_type_names_key() {
    let text = format!("[workers]\nburst_size = \"big\"\n{MINIMAL}");
    let e = error_text(&text);
    assert!(e.starts_with("test.toml:2:14: key `workers.burst_size`"), "{e}");
}

#[test]
fn out_of_range_values_are_rejected_with_their_key() {
    let cases = [
        ("[workers]\nburst_size = 65\n", "workers.burst_size", "outside 1..=64"),
        ("[workers]\nburst_size = 0\n", "workers.burst_size", "outside 1..=64"),
        ("[workers]\ncores = []\n", "workers.cores", "at least one worker"),
        ("[workers]\ncores = [1, 1]\n", "workers.cores", "listed twice"),
        ("[mempool]\ncache_size = 513\n", "mempool.cache_size", "exceeds"),
        ("[mempool]\ndata_room_bytes = 100\n", "mempool.data_room_bytes", "headroom"),
        ("[eal]\nargs = [\"-l\", \"0-1\"]\n", "eal.args", "derived from"),
        ("[workers]\nburst_size = -1\n", "workers.burst_size", ""),
        ("[workers]\nburst_size = 70000\n", "workers.burst_size", ""),
    ];
    for (prefix, key, message) in cases {
        let e = error_text(&format!("{prefix}{MINIMAL}"));
        assert!(e.contains(&format!("key `{key}`")), "{prefix}: {e}");
        assert!(e.contains(":2:"), "{prefix}: {e}");
        assert!(e.contains(message), "{prefix}: {e}");
    }
}

#[test]
fn port_values_are_checked() {
    let e = error_text("[[port]]\ndevice = \"net_ring0\"\nmtu = 20\n[[port]]\ndevice = \"net_ring1\"\n");
    assert!(e.contains("test.toml:3:7: key `port[0].mtu`"), "{e}");
    let e = error_text("[[port]]\ndevice = \"net_ring0\"\n[[port]]\ndevice = \"net_ring0,x=1\"\n");
    assert!(e.contains("test.toml:4:10: key `port[1].device`") && e.contains("used by two ports"), "{e}");
    let e = error_text("[[port]]\ndevice = \"\"\n[[port]]\ndevice = \"net_ring1\"\n");
    assert!(e.contains("key `port[0].device`") && e.contains("empty"), "{e}");
}

#[test]
fn port_count_must_be_two() {
    let e = error_text("[[port]]\ndevice = \"net_ring0\"\n");
    assert!(e.contains("exactly two [[port]] tables") && e.contains("found 1"), "{e}");
    let e = error_text("[workers]\ncores = [1]\n");
    assert!(e.contains("exactly two [[port]] tables") && e.contains("found 0"), "{e}");
}

#[test]
fn missing_file_is_a_read_error() {
    let e = Config::load(Path::new("/nonexistent/wirelat.toml")).expect_err("no such file");
    assert!(matches!(e, ConfigError::Read { .. }));
    assert!(e.to_string().contains("/nonexistent/wirelat.toml"), "{e}");
}

#[test]
fn routes_parse_own_their_segments_and_refuse_a_shared_spill_directory() {
    let lda = "[synopses.lda]\nbanks = [{ rows = 64, p = 1.0 }]\nseed = 3\n";
    let route = |segments: &str, extra: &str| {
        format!(
            "[[route]]\nsegments = [{segments}]\nfridge = true\n\
                 ship = {{ peer = \"127.0.0.1:7700\", key_file = \"k\"{extra} }}\n"
        )
    };
    let c = parse(&format!("{MINIMAL}{lda}{}", route("1, 3", ""))).expect("valid");
    let r = c.routes[0].get_ref();
    assert!(r.owns(1) && r.owns(3) && r.owns(crate::sink::LOCAL_SEGMENT) && !r.owns(2));
    let text =
        format!("{MINIMAL}{lda}{}{}", route("1", ", spill_dir = \"s\""), route("2", ", spill_dir = \"s\""));
    let e = parse(&text).expect_err("a shared spill directory");
    assert!(e.to_string().contains("share the spill directory"), "{e}");
    let e = parse(&format!("{MINIMAL}{}", route("1", ""))).expect_err("nothing measured");
    assert!(e.to_string().contains("[[route]] needs at least one [synopses.*] table"), "{e}");
}

/// `[clock] source = "kernel"` needs a live pcap port, and says so (the run cannot time a
/// single frame otherwise).
#[test]
fn kernel_clock_needs_a_live_pcap_port() {
    let kernel = "[clock]\nsource = \"kernel\"\n";
    let e = error_text(&format!("{MINIMAL}{kernel}"));
    assert!(e.contains("source = \"kernel\" needs a port on DPDK's pcap device"), "{e}");
    let live =
        "[[port]]\ndevice = \"net_pcap0,iface=w11b\"\n[[port]]\ndevice = \"net_pcap1,tx_pcap=o.pcap\"\n";
    let c = parse(&format!("{live}{kernel}")).expect("valid");
    assert_eq!(c.clock.source, ClockSource::Kernel);
    assert_eq!(c.ports.get_ref()[0].kernel_timestamp_iface(), Some("w11b"));
    assert_eq!(c.ports.get_ref()[1].kernel_timestamp_iface(), None);
    let split = "[[port]]\ndevice = \"net_pcap0,rx_iface_in=a,tx_iface=b\"\n[[port]]\ndevice = \"net_af_packet1,iface=c\"\n";
    let c = parse(&format!("{split}{kernel}")).expect("valid");
    assert_eq!(c.ports.get_ref()[0].kernel_timestamp_iface(), Some("a"));
    assert_eq!(c.ports.get_ref()[1].kernel_timestamp_iface(), None);
}

#[test]
fn shipped_configs_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("configs/ exists") {
        let path = entry.expect("dir entry").path();
        // collector.toml is `wirelat collect`'s (checked in peer::config).
        let collector = path.file_name().is_some_and(|n| n == "collector.toml");
        if path.extension().is_some_and(|e| e == "toml") && !collector {
            Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
    }
    assert!(n >= 2, "expected the shipped configs in {}", dir.display());
}

#[test]
fn measurement_sections_parse_and_are_checked() {
    let text = format!(
        "{MINIMAL}[point]\nid = 9\n[segments]\nforward = 21\nreverse = 22\n[epochs]\nlength_ms = 10\n\
             ring = 3\noverrun = \"wait\"\n[clock]\nsource = \"trace\"\n[packet]\nidentity_seed = 5\n\
             [synopses.lda]\nbanks = [{{ rows = 64, p = 1.0 }}]\nseed = 3\n\
             [output]\njson = \"-\"\ndump_dir = \"d\"\n[debug]\nharvest_delay_ms = 7\n"
    );
    let c = parse(&text).expect("valid");
    assert_eq!(c.point_ids(), PointIds { point: 9, forward_segment: 21, reverse_segment: 22 });
    assert_eq!(c.epochs.length_ns(), 10_000_000);
    assert_eq!(*c.epochs.ring.get_ref(), 3);
    assert_eq!(c.epochs.overrun, OverrunPolicy::Wait);
    assert_eq!(c.clock.source, ClockSource::Trace);
    assert_eq!(c.packet_config().identity_seed, 5);
    assert!(c.synopsis_set().lda.is_some() && c.synopsis_set().fridge.is_none());
    assert_eq!(c.output.json.as_deref(), Some("-"));
    assert_eq!(c.debug.harvest_delay_ms, 7);

    let cases = [
        ("[segments]\nforward = 3\nreverse = 3\n", "segments", "must differ"),
        ("[segments]\nforward = 0\n", "segments", "must differ"),
        ("[epochs]\nlength_ms = 0\n", "epochs.length_ms", "outside"),
        ("[epochs]\nring = 1\n", "epochs.ring", "outside"),
        ("[epochs]\noverrun = \"drop\"\n", "epochs.overrun", "unknown variant"),
        ("[clock]\nsource = \"gps\"\n", "clock.source", "unknown variant"),
        ("[packet]\npayload_prefix_bytes = 7\n", "packet", "multiple of 8"),
        ("[synopses.lda]\nbanks = [{ rows = 3, p = 1.0 }]\n", "synopses.lda", "lda."),
        ("[synopses.lda2]\n", "synopses", "unknown field"),
        (
            "[synopses.fridge]\n[synopses.lda]\nseed = 1\nbanks = [{ rows = 3, p = 1.0 }]\n",
            "synopses.lda.banks",
            "lda.",
        ),
        ("[workers]\ncount = 0\n", "workers.count", "outside"),
        ("[ship]\npeer = \"p:7700\"\nkey_file = \"k\"\n", "ship", "needs at least one [synopses.*]"),
        ("[ship]\npeer = \"p:7700\"\n", "ship", "missing field `key_file`"),
        ("[ship]\npeer = \"p:7700\"\nkey_file = \"k\"\nqueue = 3\n", "ship.queue", "unknown field"),
        (
            "[synopses.lda]\nbanks = [{ rows = 64, p = 1.0 }]\n[ship]\npeer = \"p:7700\"\nkey_file = \"k\"\nqueue_bytes = 0\n",
            "ship.queue_bytes",
            "queue_bytes = 0 is outside",
        ),
        (
            "[synopses.lda]\nbanks = [{ rows = 64, p = 1.0 }]\n[ship]\npeer = \"p:7700\"\nkey_file = \"k\"\nmax_body_bytes = 0\n",
            "ship.max_body_bytes",
            "max_body_bytes = 0 is outside",
        ),
        (
            "[synopses.lda]\nbanks = [{ rows = 64, p = 1.0 }]\n[ship]\npeer = \"p:7700\"\nkey_file = \"k\"\nio_timeout_ms = 0\n",
            "ship.io_timeout_ms",
            "io_timeout_ms = 0 is outside",
        ),
    ];
    for (prefix, key, message) in cases {
        let e = error_text(&format!("{prefix}{MINIMAL}"));
        assert!(e.contains(&format!("key `{key}")), "{prefix}: {e}");
        assert!(e.contains(message), "{prefix}: {e}");
    }
}

#[test]
fn offline_configs_need_no_ports() {
    let c = Config::parse_for(
        "[synopses.lda]\nbanks = [{ rows = 64, p = 1.0 }]\n",
        Path::new("o.toml"),
        Purpose::Offline,
    )
    .expect("no ports needed offline");
    assert!(c.ports.get_ref().is_empty());
    assert!(c.ship_config().is_none());
    let c = parse(&format!(
        "[synopses.lda]\nbanks = [{{ rows = 64, p = 1.0 }}]\n[ship]\npeer = \"10.0.0.9:7700\"\n\
             key_file = \"/etc/wirelat/peer.key\"\nspill_dir = \"spill\"\n{MINIMAL}"
    ))
    .expect("[ship] parses");
    let ship = c.ship_config().expect("[ship]");
    assert_eq!(ship.peer, "10.0.0.9:7700");
    assert_eq!(ship.spill_dir.as_deref(), Some(Path::new("spill")));
    assert_eq!(ship.queue_messages, ShipConfig::new("x", "y").queue_messages, "defaults apply");
    let e = error_text("[point]\nid = 3\n");
    assert!(e.contains("exactly two [[port]] tables") && e.contains("found 0"), "{e}");
}
