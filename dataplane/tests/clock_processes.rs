//! Two processes on one host stamp alike in `[clock] source = "tsc"` (issue 18): a packet that
//! leaves point A at TSC instant t and reaches point B at t + D must read as D, to well under
//! a microsecond, with each point in its own process calibrating on its own.
//!
//! The test re-runs its own binary twice as the two points, started 250 ms apart (so they do
//! not share a start instant or its pairs), each calibrating with
//! [`Calibrator::measured`] and re-anchoring every second as `wirelat run` does. The parent
//! hands both the same schedule of TSC instants; at each instant A stamps t and B stamps
//! t + D (a constant 50-µs delay) with the segment in force then, and the parent checks
//! B − A − D. Each child also checks its mapping against CLOCK_REALTIME at start and at every
//! re-anchoring.
//!
//! For comparison each child also keeps the mapping as it was before issue 18 ("legacy": EAL's
//! nominal rate, here the measured one rounded to 10 MHz as DPDK's Linux estimate is, and one
//! back-to-back (TSC, wall) read per anchor); the parent prints how far its stamps disagree
//! but checks only the current mapping.
//!
//! Why processes without EAL: the mapping needs only the TSC (`cpu::rdtsc`, what `rte_rdtsc`
//! reads) and CLOCK_REALTIME; EAL's part in `wirelat run` is the nominal rate, used here only
//! as the bound the measured rate must fall in. Packet I/O adds the stamping delay, which is
//! the port's (see docs), not the mapping's.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wirelat_dataplane::clock::{Calibrator, ClockMap, host_tsc_pair, read_pair, wall_clock_ns};
use wirelat_dataplane::cpu::rdtsc;

const CHILD: &str = "WIRELAT_W11_CLOCK_CHILD";
/// The constant one-way delay B adds, ns.
const DELAY_NS: f64 = 50_000.0;
const INTERVAL: Duration = Duration::from_secs(1);
/// What the two points may disagree by, and each may be off CLOCK_REALTIME by.
const BOUND_NS: f64 = 1_000.0;

/// The child's schedule: first instant, step (ticks), count, B's delay (ticks), nominal Hz.
struct Schedule {
    first: u64,
    step: u64,
    count: u64,
    delay: u64,
    hz: f64,
}

impl Schedule {
    fn parse(s: &str) -> Self {
        let v: Vec<f64> = s.split(',').map(|x| x.parse().unwrap()).collect();
        Self { first: v[0] as u64, step: v[1] as u64, count: v[2] as u64, delay: v[3] as u64, hz: v[4] }
    }
}

fn child(spec: &str, role: &str) {
    let s = Schedule::parse(spec);
    let (mut cal, seg, check) =
        Calibrator::measured(s.hz, INTERVAL.as_nanos() as u64, host_tsc_pair, std::thread::sleep).unwrap();
    println!("check start {} {} {}", check.disagreement_ns, check.pair_width_ns, check.measured_hz);
    let map = ClockMap::new(seg);
    let nominal = (s.hz / 1e7).round() * 1e7;
    let (mut legacy_cal, mut legacy) =
        Calibrator::start(rdtsc(), wall_clock_ns(), nominal, INTERVAL.as_nanos() as u64);
    let mut next = Instant::now() + INTERVAL;
    let shift = if role == "B" { s.delay } else { 0 };
    for j in 0..s.count {
        let t = s.first + j * s.step;
        while rdtsc() < t {
            if Instant::now() >= next {
                next += INTERVAL;
                if let Some(new) = cal.reanchor_pair(&map.segment(), host_tsc_pair()) {
                    map.publish(new);
                }
                legacy = legacy_cal.reanchor(&legacy, rdtsc(), wall_clock_ns());
                if let Some(p) = host_tsc_pair() {
                    println!("check reanchor {} {}", map.to_ns(p.raw) as i64 - p.wall_ns as i64, p.width_ns);
                }
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        println!("stamp {j} {} {}", map.to_ns(t + shift), legacy.to_ns(t + shift));
    }
}

struct Output {
    checks: Vec<(String, i64)>,
    stamps: Vec<u64>,
    legacy: Vec<u64>,
}

fn parse(out: &str) -> Output {
    let mut o = Output { checks: Vec::new(), stamps: Vec::new(), legacy: Vec::new() };
    for line in out.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["check", what, d, ..] => o.checks.push((what.to_string(), d.parse().unwrap())),
            ["stamp", j, ns, legacy] => {
                assert_eq!(j.parse::<usize>().unwrap(), o.stamps.len());
                o.stamps.push(ns.parse().unwrap());
                o.legacy.push(legacy.parse().unwrap());
            }
            _ => {}
        }
    }
    o
}

#[test]
fn two_processes_stamp_a_constant_delay_alike() {
    if let Ok(spec) = std::env::var(CHILD) {
        child(&spec, &std::env::var(format!("{CHILD}_ROLE")).unwrap());
        return;
    }
    // A rough rate for the schedule and as the children's nominal bound (100 ms of pairs).
    let p0 = read_pair(64, rdtsc, wall_clock_ns).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let p1 = read_pair(64, rdtsc, wall_clock_ns).unwrap();
    let hz = (p1.raw - p0.raw) as f64 * 1e9 / (p1.wall_ns - p0.wall_ns) as f64;
    // Instants from 0.8 s (B has started and calibrated) to 3.7 s, every 100 ms.
    let ticks = |s: f64| (s * hz) as u64;
    let spec = format!("{},{},30,{},{hz}", p1.raw + ticks(0.8), ticks(0.1), ticks(DELAY_NS * 1e-9));
    let exe = std::env::current_exe().unwrap();
    let spawn = |role: &str| {
        Command::new(&exe)
            .args([
                "--exact",
                "two_processes_stamp_a_constant_delay_alike",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, &spec)
            .env(format!("{CHILD}_ROLE"), role)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = spawn("A");
    std::thread::sleep(Duration::from_millis(250));
    let b = spawn("B");
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(a.status.success() && b.status.success());
    let (a, b) = (parse(&String::from_utf8_lossy(&a.stdout)), parse(&String::from_utf8_lossy(&b.stdout)));
    assert_eq!((a.stamps.len(), b.stamps.len()), (30, 30));
    // B's instant is D ticks later; D ticks are DELAY_NS within the rate's error (ppm of 50 µs:
    // picoseconds).
    let worst_of = |a: &[u64], b: &[u64]| {
        a.iter().zip(b).map(|(sa, sb)| ((*sb as f64 - *sa as f64) - DELAY_NS).abs()).fold(0.0f64, f64::max)
    };
    let worst = worst_of(&a.stamps, &b.stamps);
    println!("legacy mapping: worst |B − A − D| = {:.0} ns", worst_of(&a.legacy, &b.legacy));
    let off_wall = a.checks.iter().chain(&b.checks).map(|(_, d)| d.unsigned_abs()).max().unwrap();
    println!(
        "worst |B − A − D| = {worst:.0} ns over 30 stamps; worst mapping − CLOCK_REALTIME = {off_wall} ns ({} checks)",
        a.checks.len() + b.checks.len()
    );
    assert!(worst < BOUND_NS, "the two processes disagree by {worst} ns");
    assert!((off_wall as f64) < BOUND_NS, "a mapping is {off_wall} ns off CLOCK_REALTIME");
}
