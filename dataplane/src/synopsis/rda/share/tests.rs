//! A shared filing leaves exactly what `merge_all` leaves, whoever files which chunk: helpers on
//! other threads, none, helpers without room, and chunks with more repeats than they record.

use super::*;
use crate::synopsis::hash::mix64;
use crate::synopsis::rda::RdaConfig;
use std::sync::Arc;

fn cfg() -> RdaConfig {
    RdaConfig::online(3, 64, 1 << 16)
}

/// `ways` shards logging `n` packets between them, every `repeat_every`-th packet a copy of an
/// earlier one (on another shard where there are several), timestamps rising.
fn shards(ways: usize, n: u64, repeat_every: u64) -> Vec<Rda> {
    let mut s: Vec<Rda> = (0..ways).map(|_| Rda::new(&cfg()).unwrap()).collect();
    for i in 0..n {
        let identity =
            if repeat_every > 0 && i % repeat_every == repeat_every - 1 { mix64(i / 2) } else { mix64(i) };
        let w = (i as usize * 7 + 3) % ways;
        s[w].update_logged(identity, 0, 1_000 + i * 10);
    }
    s
}

/// What `merge_all` leaves.
fn merged(shards: &[Rda]) -> Rda {
    let mut acc = Rda::new(&cfg()).unwrap();
    let refs: Vec<&Rda> = shards.iter().collect();
    acc.merge_all(&refs).unwrap();
    acc
}

/// The shared filing, with `helpers` threads calling `help` with `room` pairs of sorter room
/// until nothing is left; the control thread then takes the logs back.
fn shared(mut shards: Vec<Rda>, job: &mut FilingJob, helpers: usize, room: usize) -> (Rda, Shared, Vec<Rda>) {
    let mut acc = Rda::new(&cfg()).unwrap();
    let mut refs: Vec<&mut Rda> = shards.iter_mut().collect();
    assert!(acc.lend_logs(&mut refs, job).unwrap(), "shareable");
    assert!(job.is_open());
    std::thread::scope(|s| {
        for _ in 0..helpers {
            let job = &*job;
            s.spawn(move || {
                let mut sorter = Sorter::with_room(room);
                while job.help(&mut sorter) != Help::NoneLeft {}
            });
        }
    });
    let done = acc.take_back_logs(&mut refs, job);
    assert!(!job.is_open());
    assert_eq!(done.by_helpers + done.by_control, CHUNKS);
    (acc, done, shards)
}

#[test]
fn helpers_on_other_threads_file_what_merge_all_files() {
    let mut job = FilingJob::default();
    for (ways, n, repeat_every) in [(1, 1, 0), (1, 5_000, 0), (3, 20_000, 97), (5, 40_000, 13)] {
        let logged = shards(ways, n, repeat_every);
        let want = merged(&logged);
        for helpers in [0, 1, 3] {
            let (got, done, back) = shared(logged.clone(), &mut job, helpers, 4_096);
            assert_eq!(got, want, "{ways} ways, {n} packets, {helpers} helpers");
            assert_eq!(got.counters(), want.counters());
            if helpers == 0 {
                assert_eq!(done.by_control, CHUNKS);
            }
            if repeat_every == 0 {
                assert_eq!(done.moved, 0, "no repeat, no hole");
            }
            for (b, l) in back.iter().zip(&logged) {
                assert_eq!(
                    (b.log.capacity(), b.log.len()),
                    (l.log.capacity(), 0),
                    "each shard has its log back"
                );
            }
        }
    }
}

#[test]
fn repeats_in_the_first_chunk_leave_a_hole_that_is_closed() {
    let mut logged = shards(2, 10_000, 0);
    // Ids of top byte 0: in chunk 0, so every later pair moves down.
    for k in 1..=3u64 {
        for shard in logged.iter_mut() {
            shard.update_logged(k << 8, 0, 500 + k);
        }
    }
    let want = merged(&logged);
    assert_eq!(want.counters().duplicate_ids, 3);
    let (got, done, _) = shared(logged, &mut FilingJob::default(), 1, 4_096);
    assert_eq!(got, want);
    assert!(done.moved > 9_000, "moved {}", done.moved);
}

#[test]
fn a_chunk_with_more_copies_than_it_records_is_filed_again_by_the_control_thread() {
    let mut logged = shards(2, 3_000, 0);
    let copies = REPEAT_ROOM as u64 + 10;
    for k in 0..copies {
        logged[(k % 2) as usize].update_logged(0x0100_0000_0000_0000 | (k / 3 + 1), 0, 900 + k);
    }
    let want = merged(&logged);
    assert!(want.counters().duplicates > 0);
    let (got, done, _) = shared(logged, &mut FilingJob::default(), 2, 4_096);
    assert_eq!(got, want);
    assert!(done.by_control >= 1, "{done:?}");
}

#[test]
fn helpers_without_room_decline_and_the_control_thread_files_everything() {
    let logged = shards(3, 30_000, 31);
    let want = merged(&logged);
    let (got, done, _) = shared(logged, &mut FilingJob::default(), 2, 1);
    assert_eq!(got, want);
    assert_eq!(done, Shared { by_helpers: 0, by_control: CHUNKS, moved: done.moved });
}

#[test]
fn logs_that_overflowed_or_an_accumulator_in_use_are_not_lent() {
    let mut job = FilingJob::default();
    // A log filled past its regions uses its overflow: the regions alone are not the log.
    let small = RdaConfig::online(3, 64, 2_048);
    let mut full = Rda::new(&small).unwrap();
    for i in 0..2_048u64 {
        full.update_logged(mix64(i) | 0xff00_0000_0000_0000, 0, i + 1);
    }
    let mut acc = Rda::new(&small).unwrap();
    assert!(!acc.lend_logs(&mut [&mut full], &mut job).unwrap());
    assert_eq!(acc, Rda::new(&small).unwrap(), "nothing taken");
    // Another configuration is an error, and nothing is lent.
    let mut other = Rda::new(&cfg()).unwrap();
    assert!(acc.lend_logs(&mut [&mut other], &mut job).is_err());
    // An accumulator that already holds packets.
    let mut busy = Rda::new(&cfg()).unwrap();
    busy.update_raw(mix64(1), 0, 5);
    let mut one = shards(1, 100, 0);
    assert!(!busy.lend_logs(&mut [&mut one[0]], &mut job).unwrap());
    assert_eq!(one[0].log.len(), 100);
    assert!(!job.is_open());
}

/// The board's tickets: helpers on threads file through [`FilingBoard::help`] until it has
/// nothing for them, more tickets posted than helpers; the control thread's `withdraw_all` then
/// leaves it the only handle, and the result is `merge_all`'s.
#[test]
fn tickets_on_the_board_come_back_to_the_owner_alone() {
    let logged = shards(3, 30_000, 41);
    let want = merged(&logged);
    let mut lent = logged.clone();
    let mut refs: Vec<&mut Rda> = lent.iter_mut().collect();
    let mut acc = Rda::new(&cfg()).unwrap();
    let mut job = Arc::new(FilingJob::default());
    assert!(acc.lend_logs(&mut refs, Arc::get_mut(&mut job).unwrap()).unwrap());
    let board = FilingBoard::default();
    board.post(&job, 5);
    assert_eq!(Arc::strong_count(&job), 6);
    std::thread::scope(|s| {
        for _ in 0..2 {
            let board = &board;
            s.spawn(move || {
                let mut sorter = Sorter::with_room(4_096);
                while let Some(h) = board.help(&mut sorter) {
                    if h == Help::NoneLeft {
                        break;
                    }
                }
            });
        }
    });
    assert!(job.is_taken());
    board.withdraw_all(&job);
    assert_eq!(Arc::strong_count(&job), 1);
    assert!(board.help(&mut Sorter::with_room(4_096)).is_none(), "no ticket left");
    let done = acc.take_back_logs(&mut refs, Arc::get_mut(&mut job).unwrap());
    assert_eq!(done.by_helpers, CHUNKS);
    assert_eq!(acc, want);
}

#[test]
fn an_epoch_without_packets_is_not_lent() {
    let mut empty = shards(2, 0, 0);
    let mut refs: Vec<&mut Rda> = empty.iter_mut().collect();
    let mut acc = Rda::new(&cfg()).unwrap();
    assert!(!acc.lend_logs(&mut refs, &mut FilingJob::default()).unwrap());
}
