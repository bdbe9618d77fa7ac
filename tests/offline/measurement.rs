//! The measurement over pcap files: every packet into epochs, JSON lines and body dumps equal
//! with one and three emulated workers, and bad input reported clearly.

use super::*;

fn offline(dir: &Path, pcaps: &[PathBuf; 2], workers: usize) -> PathBuf {
    offline_with(dir, &format!("w{workers}"), pcaps, &["--workers", &workers.to_string()])
}

/// `wirelat offline` into `dir/name` with `args` (the worker count and the benchmark options).
fn offline_with(dir: &Path, name: &str, pcaps: &[PathBuf; 2], args: &[&str]) -> PathBuf {
    let out = dir.join(name);
    std::fs::create_dir_all(&out).expect("mkdir");
    let config = out.join("c.toml");
    let text = format!(
        "[output]\njson = \"{}\"\ndump_dir = \"{}\"\n{CONFIG}",
        out.join("e.jsonl").display(),
        out.join("dump").display()
    );
    std::fs::write(&config, text).expect("config");
    run_offline(&config, pcaps, args);
    out
}

fn lines(out: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out.join("e.jsonl"))
        .expect("json lines")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect()
}

/// Frames the packet layer measures: IPv4 or IPv6 directly on Ethernet (the generated traffic
/// has no VLAN tags; its only other frames are ARP).
fn ip_frames(pcaps: &[PathBuf; 2]) -> [u64; 2] {
    let count = |p: &Path| {
        read_frames(p).iter().filter(|f| matches!(f.get(12..14), Some([0x08, 0x00] | [0x86, 0xdd]))).count()
            as u64
    };
    [count(&pcaps[0]), count(&pcaps[1])]
}

/// Per epoch and fridge kind: the samples in each histogram bin (low_ns, high_ns, samples).
type FridgeBins = BTreeMap<(u64, String), Vec<(u64, u64, u64)>>;

fn fridge_bins(lines: &[serde_json::Value]) -> FridgeBins {
    let mut out = FridgeBins::new();
    for l in lines.iter().filter(|l| l["kind"] == "fridge") {
        let epoch = l["epoch"].as_u64().expect("epoch");
        for k in l["summary"]["report"]["kinds"].as_array().expect("kinds") {
            let bins = k["all"]["histogram"]
                .as_array()
                .expect("histogram")
                .iter()
                .map(|b| {
                    let field = |name: &str| b[name].as_u64().expect("histogram field");
                    (field("low_ns"), field("high_ns"), field("samples"))
                })
                .collect();
            out.insert((epoch, k["kind"].as_str().expect("kind").to_owned()), bins);
        }
    }
    out
}

fn dump(out: &Path) -> BTreeMap<String, Vec<u8>> {
    read_dump(&out.join("dump"))
}

#[test]
fn offline_measures_every_packet_into_epochs_and_merges_workers_exactly() {
    let dir = scratch();
    let d = dir.path();
    let pcaps = trace(d);
    let ip = ip_frames(&pcaps);
    assert!(ip[0] > 1000 && ip[1] > 1000, "both directions carry traffic: {ip:?}");
    let one = offline(d, &pcaps, 1);
    let three = offline(d, &pcaps, 3);
    let (a, b) = (lines(&one), lines(&three));
    // 500 ms of traffic in 100 ms epochs (plus the 30 ms segment delay and the server's think
    // time after the last request): 5 to 7 epochs, each with 1 fridge + 2 LDA + 2 RDA lines.
    let epochs: BTreeSet<u64> = a.iter().map(|l| l["epoch"].as_u64().expect("epoch")).collect();
    assert!((5..=7).contains(&epochs.len()), "{epochs:?}");
    assert_eq!(a.len(), epochs.len() * 5);
    assert_eq!(b.len(), a.len());
    for (lines, workers) in [(&a, 1), (&b, 3)] {
        for l in lines.iter() {
            assert_eq!(l["point"], 4);
            assert_eq!(l["epoch_len_ns"], 100_000_000);
            assert_eq!(l["complete"], true);
            assert_eq!(l["summary"]["shards"], workers, "every emulated worker gives a shard: {l}");
            let seg = l["segment"].as_u64().expect("segment");
            match l["kind"].as_str().expect("kind") {
                "fridge" => assert_eq!(seg, 0),
                "lda" | "rda" => assert!(seg == 40 || seg == 41, "{seg}"),
                k => panic!("unexpected kind {k}"),
            }
        }
    }
    // Every IP frame is measured exactly once, in the LDA epoch of its direction (port 0 is the
    // forward segment 40, port 1 the reverse segment 41), with one worker and with three.
    for lines in [&a, &b] {
        let measured = |seg: u64| -> u64 {
            lines
                .iter()
                .filter(|l| l["kind"] == "lda" && l["segment"] == seg)
                .map(|l| l["summary"]["measured"].as_u64().expect("measured"))
                .sum()
        };
        assert_eq!([measured(40), measured(41)], ip);
    }
    // Three emulated workers: LDA and RDA bodies are byte-identical to one worker's (exact
    // merge of shards; each flow stays on one worker).
    let (da, db) = (dump(&one), dump(&three));
    assert_eq!(da.keys().collect::<Vec<_>>(), db.keys().collect::<Vec<_>>());
    assert_eq!(da.len(), a.len(), "one body per JSON line");
    for (name, bytes) in &da {
        if !name.starts_with("fridge") {
            assert!(Some(bytes) == db.get(name), "{name} differs between 1 and 3 workers");
        }
    }
    // The fridge: each worker has its own slots, so the weights may differ with the worker
    // count, but with entry probability 1 and slots never full every response is matched on the
    // worker that holds its request: the same samples fall into the same bins, epoch by epoch.
    let (fa, fb) = (fridge_bins(&a), fridge_bins(&b));
    let samples: u64 = fa.values().flatten().map(|(_, _, n)| n).sum();
    assert!(samples > 20, "handshakes and DNS exchanges give fridge samples: {samples}");
    assert_eq!(fa, fb);
    // The bodies decode with the configuration and count the measured packets.
    let cfg = LdaConfig::single_bank(256, 1.0, 9);
    let total: u64 = da
        .iter()
        .filter(|(n, _)| n.starts_with("lda"))
        .map(|(_, b)| Lda::decode(&cfg, b).expect("decode").total_packets())
        .sum();
    assert_eq!(total, ip[0] + ip[1]);
}

/// `[epochs] worker_filing` (the default): the emulated workers file RDA's logs and gather and
/// encode LDS's flow lists, chunk by chunk, and the bodies are byte-identical to the control
/// thread's own harvest (`worker_filing = false`), with one worker and with three; the log says
/// who did the chunks.
#[test]
fn workers_file_rdas_logs_and_ldss_flow_lists_into_the_bodies_the_control_thread_would() {
    let dir = scratch();
    let d = dir.path();
    let pcaps = trace(d);
    for workers in [1usize, 3] {
        let run = |name: &str, filing: bool| {
            let out = d.join(format!("{name}-w{workers}"));
            std::fs::create_dir_all(&out).expect("mkdir");
            let config = out.join("c.toml");
            // The [epochs] table of CONFIG, with the key added.
            let body = CONFIG.replace("[epochs]\n", &format!("[epochs]\nworker_filing = {filing}\n"));
            assert_ne!(body, CONFIG, "CONFIG has an [epochs] table");
            let body = format!("{body}[synopses.lds]\nrows = 4\nwidth = 1024\nflow_capacity = 8192\n");
            let text = format!("[output]\ndump_dir = \"{}\"\n{body}", out.join("dump").display());
            std::fs::write(&config, text).expect("config");
            let output = offline_output(&config, &pcaps, &["--workers", &workers.to_string()]);
            assert!(output.status.success(), "{}", describe(&output));
            (read_dump(&out.join("dump")), String::from_utf8_lossy(&output.stderr).into_owned())
        };
        let (shared, log) = run("shared", true);
        let (own, own_log) = run("own", false);
        let rda: Vec<&String> = shared.keys().filter(|n| n.starts_with("rda")).collect();
        assert!(rda.len() >= 10, "RDA bodies of both directions: {rda:?}");
        assert_eq!(shared, own, "{workers} workers: every body equal with and without the workers' filing");
        let lds: Vec<&String> = shared.keys().filter(|n| n.starts_with("lds")).collect();
        assert!(lds.len() >= 10, "LDS bodies of both directions: {lds:?}");
        let find =
            |what: &str| log.lines().find(|l| l.contains(what)).unwrap_or_else(|| panic!("{what}: {log}"));
        let field = |line: &str, k: &str| -> u64 {
            let at = line.find(&format!("{k}=")).unwrap_or_else(|| panic!("{k} in {line}")) + k.len() + 1;
            line[at..]
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|v| v.parse().ok())
                .expect("number")
        };
        let line = find("RDA filing shared");
        let rda_field = |k: &str| field(line, k);
        assert_eq!(rda_field("lent"), rda.len() as u64, "every epoch and direction lent: {line}");
        let filed = rda_field("chunks_by_workers") + rda_field("chunks_by_control");
        assert_eq!(filed, 64 * rda_field("lent"), "{line}");
        assert!(rda_field("chunks_by_workers") > 0, "{line}");
        assert!(!own_log.contains("RDA filing shared"), "worker_filing = false lends nothing");
        // An epoch's list is lent where some flow was recorded: a chunk per worker that saw one.
        let line = find("LDS flow lists gathered");
        let lds_field = |k: &str| field(line, k);
        assert!(lds_field("lent") >= 2 && lds_field("lent") <= lds.len() as u64, "{line}");
        assert!(lds_field("chunks_by_workers") > 0, "{line}");
        assert!(
            lds_field("chunks_by_workers") + lds_field("chunks_by_control") >= lds_field("lent"),
            "{line}"
        );
        assert!(!own_log.contains("LDS flow lists"), "worker_filing = false lends nothing");
    }
}

/// Per (kind, segment, epoch): LDA's measured packets, RDA's counters, or the fridge's bins.
type Counts = BTreeMap<(String, u64, u64), serde_json::Value>;

fn counts(lines: &[serde_json::Value]) -> Counts {
    let bins = fridge_bins(lines);
    lines
        .iter()
        .map(|l| {
            let (kind, seg, epoch) =
                (l["kind"].as_str().expect("kind"), l["segment"].as_u64(), l["epoch"].as_u64());
            let (seg, epoch) = (seg.expect("segment"), epoch.expect("epoch"));
            let value = match kind {
                "lda" => l["summary"]["measured"].clone(),
                "rda" => l["summary"]["counters"].clone(),
                _ => {
                    let kinds = bins.range((epoch, String::new())..(epoch + 1, String::new()));
                    serde_json::json!(kinds.map(|((_, kind), bins)| (kind, bins)).collect::<Vec<_>>())
                }
            };
            ((kind.to_owned(), seg, epoch), value)
        })
        .collect()
}

/// The benchmark options of `scripts/control-cost.sh`. `--replicas`: each of three workers
/// measures the whole trace as flows and packet ids of its own (no RDA duplicates across
/// workers; three times every count, the fridge's samples too, so replies still meet their
/// requests). `--loops 2`: the trace again in later epochs, shifted by whole epochs, measuring
/// exactly what the first pass did.
#[test]
fn replicas_give_every_worker_the_whole_trace_and_loops_replay_it_in_later_epochs() {
    let dir = scratch();
    let d = dir.path();
    let pcaps = trace(d);
    let one = counts(&lines(&offline(d, &pcaps, 1)));
    let replicas = counts(&lines(&offline_with(d, "r3", &pcaps, &["--workers", "3", "--replicas"])));
    assert_eq!(replicas.keys().collect::<Vec<_>>(), one.keys().collect::<Vec<_>>());
    let mut rda_cached = 0;
    for (key, v) in &one {
        let r = &replicas[key];
        match key.0.as_str() {
            "lda" => assert_eq!(*r, times(v, 3), "{key:?}"),
            "rda" => {
                assert_eq!(*r, times(v, 3), "{key:?}: three times the ids, none of them repeated");
                assert_eq!(r["duplicates"], 0, "{key:?}");
                rda_cached += v["cached"].as_u64().expect("cached");
            }
            _ => {
                let bins = |v: &serde_json::Value| -> Vec<u64> {
                    v.as_array()
                        .expect("kinds")
                        .iter()
                        .flat_map(|k| {
                            k[1].as_array().expect("bins").iter().map(|b| b[2].as_u64().expect("samples"))
                        })
                        .collect()
                };
                let want: Vec<u64> = bins(v).iter().map(|n| n * 3).collect();
                assert_eq!(bins(r), want, "{key:?}: every copy's replies meet its requests");
            }
        }
    }
    assert!(rda_cached > 1000, "{rda_cached}");
    let looped = counts(&lines(&offline_with(d, "l2", &pcaps, &["--workers", "1", "--loops", "2"])));
    assert_eq!(looped.len(), 2 * one.len());
    let epochs: BTreeSet<u64> = one.keys().map(|k| k.2).collect();
    let (first, last) = (epochs.first().copied().expect("epochs"), epochs.last().copied().expect("epochs"));
    let period = last + 1 - first;
    for (key, v) in &one {
        assert_eq!(looped.get(key), Some(v), "{key:?}: the first pass");
        let (kind, seg, epoch) = key.clone();
        assert_eq!(
            looped.get(&(kind, seg, epoch + period)),
            Some(v),
            "{key:?}: the second pass, {period} epochs on"
        );
    }
}

/// `v` with every count in it (a number, or an object of numbers) multiplied by `k`.
fn times(v: &serde_json::Value, k: u64) -> serde_json::Value {
    match v {
        serde_json::Value::Object(o) => o.iter().map(|(name, v)| (name.clone(), times(v, k))).collect(),
        v => v.as_u64().map_or_else(|| v.clone(), |n| serde_json::json!(n * k)),
    }
}

#[test]
fn offline_reports_bad_input_clearly() {
    let dir = scratch();
    let d = dir.path();
    let config = d.join("c.toml");
    std::fs::write(&config, CONFIG).expect("config");
    std::fs::write(d.join("junk.pcap"), b"not a pcap at all").expect("junk");
    let run = || {
        wirelat()
            .args(["offline", "--config"])
            .arg(&config)
            .arg("--port0")
            .arg(d.join("junk.pcap"))
            .output()
            .expect("run")
    };
    let output = run();
    // Bad input: exit code 2 and one sentence naming the file.
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not a pcap file"), "{}", describe(&output));
    // A directory given as a pcap: the OS's reason, not pcap-file's "Error reading bytes".
    std::fs::create_dir(d.join("dir.pcap")).expect("dir");
    let output = wirelat()
        .args(["offline", "--config"])
        .arg(&config)
        .arg("--port0")
        .arg(d.join("dir.pcap"))
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(err.contains("cannot read") && err.contains("Is a directory"), "{err}");
    assert!(!err.contains("Error reading bytes"), "{err}");
    let output = wirelat()
        .args(["offline", "--config"])
        .arg(&config)
        .arg("--port0")
        .arg(d.join("junk.pcap"))
        .args(["--workers", "0"])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--workers"), "{}", describe(&output));
    // A configuration within every documented range whose RDA buffers cannot fit in this
    // machine: refused with the figure before anything is allocated (it aborted on
    // allocation).
    std::fs::write(
        &config,
        "[epochs]\nring = 64\n[synopses.rda]\nbinding = { mode = \"online\", buckets_per_bank = 256 }\n\
         cache_capacity = 134217728\n",
    )
    .expect("config");
    let output = run();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(err.contains("reserved logs alone need") && err.contains("MiB of memory and swap"), "{err}");
    // The same for LDS's flow logs, which the workers back at start (2^24 flows × 56 B × 64 × 2).
    std::fs::write(
        &config,
        "[epochs]\nring = 64\n[synopses.lds]\nrows = 2\nwidth = 256\nflow_capacity = 16777216\n",
    )
    .expect("config");
    let output = run();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(err.contains("reserved logs alone need") && err.contains("flow_capacity 16777216"), "{err}");
    std::fs::write(&config, "[epochs]\nlength_ms = 0\n").expect("config");
    let output = run();
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("epochs.length_ms"), "{}", describe(&output));
}
