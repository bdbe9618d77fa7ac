use super::*;
use wirelat_dataplane::synopsis::SynopsisKind;

fn key(epoch: u64) -> MessageKey {
    MessageKey { point: 1, segment: 2, epoch, kind: SynopsisKind::Lda }
}

fn frame(epoch: u64, len: usize) -> Vec<u8> {
    Message::Epoch(EpochFrame {
        key: key(epoch),
        fingerprint: 3,
        complete: true,
        epoch_len_ns: 10,
        synopsis: vec![7; len],
    })
    .encode()
}

fn limits(mem: usize, spill: Option<&Path>) -> QueueLimits {
    QueueLimits {
        memory_messages: mem,
        memory_bytes: 1 << 30,
        spill_dir: spill.map(Path::to_path_buf),
        spill_bytes: 1 << 30,
        spill_all: false,
    }
}

fn keys(w: &Work) -> Vec<u64> {
    w.items.iter().map(|(k, _)| k.epoch).collect()
}

#[test]
fn sends_in_order_resends_after_reconnect_and_drops_on_ack() {
    let mut q = Queue::new(limits(10, None));
    for e in 0..3 {
        assert_eq!(q.offer(key(e), frame(e, 4)), Offer::Queued);
    }
    assert_eq!(q.offer(key(1), frame(1, 4)), Offer::Duplicate);
    q.advance_watermark(3);
    let w = q.next_work(2, u64::MAX);
    assert_eq!(keys(&w), vec![0, 1]);
    assert_eq!(w.progress, Some(2), "the watermark stops at the oldest epoch not sent");
    let w = q.next_work(2, u64::MAX);
    assert_eq!(keys(&w), vec![2]);
    assert_eq!(w.progress, Some(3));
    assert!(!q.has_work(u64::MAX));
    assert!(q.ack(&key(1)));
    assert!(!q.ack(&key(1)));
    assert_eq!(q.safe_watermark(), 0, "epoch 0 is still unacknowledged");
    assert!(q.ack(&key(0)));
    assert_eq!(q.safe_watermark(), 2);
    q.offer(key(0), frame(0, 4));
    assert_eq!(q.mark_all_unsent(), 1, "epoch 2 was sent before; the new epoch 0 never was");
    let w = q.next_work(10, u64::MAX);
    assert_eq!(keys(&w), vec![2, 0], "in enqueue order");
    assert_eq!(w.progress, Some(3), "the watermark is announced again on a new connection");
}

#[test]
fn the_send_window_holds_back_until_acknowledged_and_the_watermark_still_moves() {
    let mut q = Queue::new(limits(100, None));
    let size = frame(0, 100).len() as u64;
    for e in 0..10 {
        q.offer(key(e), frame(e, 100));
    }
    q.advance_watermark(10);
    // Room for three frames in flight.
    let window = 3 * size;
    let w = q.next_work(64, window);
    assert_eq!(keys(&w), vec![0, 1, 2]);
    assert_eq!(w.progress, Some(3), "epochs below 3 were all sent");
    assert_eq!(q.in_flight_bytes(), window);
    assert!(!q.has_work(window), "a full window waits (no busy loop)");
    assert!(q.next_work(64, window).items.is_empty());
    assert!(q.ack(&key(1)));
    assert!(q.has_work(window));
    let w = q.next_work(64, window);
    assert_eq!(keys(&w), vec![3], "one acknowledgement, one frame");
    assert_eq!(w.progress, Some(4));
    // A reconnect starts the window over: everything unacknowledged is in it again.
    assert_eq!(q.mark_all_unsent(), 3, "0, 2 and 3 were sent and are not acknowledged");
    assert_eq!(keys(&q.next_work(64, window)), vec![0, 2, 3]);
    // No acknowledgement for WINDOW_STALL: one more batch goes (a group larger than the
    // window must not wait forever).
    std::thread::sleep(WINDOW_STALL + Duration::from_millis(50));
    assert!(q.has_work(window));
    let w = q.next_work(2, window);
    assert_eq!(keys(&w), vec![4, 5]);
    assert!(!q.has_work(window), "the valve opens once per stall");
}

#[test]
fn full_memory_without_spill_gives_up_and_with_spill_goes_to_disk() {
    let mut q = Queue::new(limits(1, None));
    assert_eq!(q.offer(key(0), frame(0, 4)), Offer::Queued);
    assert_eq!(q.offer(key(1), frame(1, 4)), Offer::GivenUp(GiveUp::QueueFull));
    let dir = tempfile::tempdir().unwrap();
    let mut q = Queue::new(limits(1, Some(dir.path())));
    assert_eq!(q.offer(key(0), frame(0, 4)), Offer::Queued);
    assert_eq!(q.offer(key(1), frame(1, 4)), Offer::Queued);
    assert_eq!(q.spilled(), 1);
    let w = q.next_work(10, u64::MAX);
    assert!(matches!(w.items[1].1, FrameSource::Disk(_)));
    assert!(q.ack(&key(1)));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "acked spill files are removed");
}

#[test]
fn spilled_entries_survive_a_restart_and_corrupt_files_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let mut q = Queue::new(limits(10, Some(dir.path())));
    for e in [5, 3, 4] {
        q.offer(key(e), frame(e, 8));
    }
    assert!(q.ack(&key(4)));
    assert!(q.spill_remaining().is_empty());
    std::fs::write(dir.path().join("p1-s2-e9-k2.wlq"), b"garbage").unwrap();
    std::fs::write(dir.path().join("p1-s2-e8-k2.tmp"), b"half").unwrap();
    drop(q);
    let mut q = Queue::new(limits(10, Some(dir.path())));
    let got = q.load_spill(1, 1 << 20, |_| true);
    assert_eq!(got.loaded, 2);
    assert_eq!(reasons(&got), vec![SetAside::Corrupt]);
    assert_eq!(keys(&q.next_work(10, u64::MAX)), vec![3, 5]);
    assert_eq!(wlq_files(dir.path()), 2);
    // A filter (the run's fingerprints) sets aside what it refuses.
    drop(q);
    let mut q = Queue::new(limits(10, Some(dir.path())));
    let got = q.load_spill(1, 1 << 20, |e| e.key.epoch != 3);
    assert_eq!(got.loaded, 1);
    assert_eq!(reasons(&got), vec![SetAside::ConfigChanged]);
    assert_eq!(keys(&q.next_work(10, u64::MAX)), vec![5]);
    assert_eq!(wlq_files(dir.path()), 1);
    let aside = dir.path().join(SET_ASIDE_DIR);
    assert!(aside.join("p1-s2-e3-k2.wlq.config_changed").exists());
    assert!(aside.join("p1-s2-e9-k2.wlq.corrupt").exists());
}

fn reasons(l: &SpillLoad) -> Vec<SetAside> {
    l.set_aside.iter().map(|(r, _)| *r).collect()
}

fn wlq_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "wlq"))
        .count()
}

#[test]
fn another_points_spill_files_are_set_aside_never_loaded() {
    let dir = tempfile::tempdir().unwrap();
    // Point 2 spilled epochs 1 and 2 here (a shared directory, or this point's old id).
    let mut theirs = Queue::new(limits(10, Some(dir.path())));
    for e in [1, 2] {
        let k = MessageKey { point: 2, ..key(e) };
        let f = Message::Epoch(EpochFrame {
            key: k,
            fingerprint: 3,
            complete: true,
            epoch_len_ns: 10,
            synopsis: vec![1; 4],
        })
        .encode();
        assert_eq!(theirs.offer(k, f), Offer::Queued);
    }
    assert!(theirs.spill_remaining().is_empty());
    drop(theirs);
    // The same content under this point's file name is refused too.
    std::fs::copy(dir.path().join("p2-s2-e2-k2.wlq"), dir.path().join("p1-s2-e2-k2.wlq")).unwrap();
    let mut q = Queue::new(limits(10, Some(dir.path())));
    q.offer(key(7), frame(7, 4));
    let got = q.load_spill(1, 1 << 20, |_| true);
    assert_eq!(got.loaded, 0);
    assert_eq!(reasons(&got), vec![SetAside::ForeignPoint; 3]);
    assert_eq!(keys(&q.next_work(10, u64::MAX)), vec![7], "only this point's own epoch is sent");
    assert_eq!(wlq_files(dir.path()), 0);
    assert_eq!(std::fs::read_dir(dir.path().join(SET_ASIDE_DIR)).unwrap().count(), 3);
}

#[test]
fn spill_all_counts_what_could_not_be_made_crash_safe() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = limits(10, Some(dir.path()));
    l.spill_all = true;
    // Room on disk for two frames only (as a full disk would leave).
    l.spill_bytes = 2 * frame(0, 16).len() as u64;
    let mut q = Queue::new(l);
    for e in 0..5 {
        assert_eq!(q.offer(key(e), frame(e, 16)), Offer::Queued);
    }
    assert_eq!(q.not_crash_safe(), 3, "three epochs are in memory only");
    assert_eq!(wlq_files(dir.path()), 2);
}

#[test]
fn old_entries_expire() {
    let mut q = Queue::new(limits(10, None));
    q.offer(key(0), frame(0, 1));
    assert!(q.expire(Duration::from_secs(60)).is_empty());
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(q.expire(Duration::from_millis(1)), vec![key(0)]);
    assert!(q.is_empty());
}
