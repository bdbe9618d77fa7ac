//! Sorting a packet log by id in cache-sized steps: the bulk path by which the control thread
//! files a whole epoch's logs into the cache ([`super::TimestampCache::file_sorted`]).
//!
//! Why sort instead of inserting into the hash table: with one new id per packet, the table
//! (2²¹ slots, 32 MiB at the default capacity) costs a random read-modify-write of a line per
//! packet, and it must be zeroed every epoch and copied out for retention. A sorted run is
//! written once, in order, and the retained copy is then sorted already, so the look-ups need
//! no sort (BENCHMARKS "W17 (third session)").
//!
//! How: ids are well-mixed hashes (the packet layer's seeded xxh3), so their top byte spreads
//! them evenly. One pass scatters the log by the top byte into 256 buckets of the output (256
//! write streams: their tails stay in L1). Each bucket (≈ 64 KiB for 10⁶ packets) is then
//! sorted while it is in L2: by the second byte into a scratch buffer, and each of those
//! sub-buckets (≈ 15 ids) by insertion sort. A skewed bucket (crafted ids) only costs time:
//! long sub-buckets fall back to the standard library's sort.

/// Sub-buckets longer than this use `sort_unstable` (a skewed input; insertion sort is
/// quadratic).
const INSERTION_MAX: usize = 48;

/// Sorts `src`'s (id, timestamp) pairs by id into `out[..src.len()]` (entries of equal ids in
/// any order). `out` and `scratch` only grow: their stale tails are never read, so a reused
/// buffer is not zeroed again. Control thread only (may allocate on growth).
pub fn sort_by_id(src: &[(u64, u64)], out: &mut Vec<(u64, u64)>, scratch: &mut Vec<(u64, u64)>) {
    let n = src.len();
    if out.len() < n {
        out.resize(n, (0, 0));
    }
    let mut starts = [0usize; 257];
    for &(id, _) in src {
        starts[top_byte(id) + 1] += 1;
    }
    for b in 0..256 {
        starts[b + 1] += starts[b];
    }
    let mut next = starts;
    for &pair in src {
        let b = top_byte(pair.0);
        // `next[b] < starts[b + 1] <= n <= out.len()`: the counts above place every pair.
        if let Some(slot) = out.get_mut(next[b]) {
            *slot = pair;
        }
        next[b] += 1;
    }
    for b in 0..256 {
        if let Some(bucket) = out.get_mut(starts[b]..starts[b + 1]) {
            sort_bucket(bucket, scratch);
        }
    }
}

#[inline(always)]
fn top_byte(id: u64) -> usize {
    (id >> 56) as usize
}

#[inline(always)]
fn second_byte(id: u64) -> usize {
    ((id >> 48) & 0xff) as usize
}

/// Sorts one top-byte bucket (all ids share their top byte).
fn sort_bucket(bucket: &mut [(u64, u64)], scratch: &mut Vec<(u64, u64)>) {
    if bucket.len() <= INSERTION_MAX {
        insertion_sort(bucket);
        return;
    }
    if scratch.len() < bucket.len() {
        scratch.resize(bucket.len(), (0, 0));
    }
    let Some(tmp) = scratch.get_mut(..bucket.len()) else { return };
    let mut starts = [0usize; 257];
    for &(id, _) in bucket.iter() {
        starts[second_byte(id) + 1] += 1;
    }
    for b in 0..256 {
        starts[b + 1] += starts[b];
    }
    let mut next = starts;
    for &pair in bucket.iter() {
        let b = second_byte(pair.0);
        if let Some(slot) = tmp.get_mut(next[b]) {
            *slot = pair;
        }
        next[b] += 1;
    }
    for b in 0..256 {
        if let Some(sub) = tmp.get_mut(starts[b]..starts[b + 1]) {
            if sub.len() <= INSERTION_MAX {
                insertion_sort(sub);
            } else {
                sub.sort_unstable_by_key(|p| p.0);
            }
        }
    }
    bucket.copy_from_slice(tmp);
}

fn insertion_sort(v: &mut [(u64, u64)]) {
    for i in 1..v.len() {
        let x = v[i];
        let mut j = i;
        while j > 0 && v[j - 1].0 > x.0 {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synopsis::hash::mix64;

    fn check(src: &[(u64, u64)]) {
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        sort_by_id(src, &mut out, &mut scratch);
        let got = &out[..src.len()];
        assert!(got.windows(2).all(|w| w[0].0 <= w[1].0), "sorted by id");
        let (mut a, mut b) = (src.to_vec(), got.to_vec());
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "the same pairs");
    }

    #[test]
    fn sorts_mixed_ids_of_every_size_with_repeats() {
        for n in [0usize, 1, 2, 47, 48, 49, 300, 5_000, 70_000] {
            let src: Vec<(u64, u64)> = (0..n as u64).map(|i| (mix64(i % 9_000 + 1), i)).collect();
            check(&src);
        }
    }

    #[test]
    fn skewed_ids_still_sort() {
        // One top byte, one second byte: every id in a single sub-bucket (the fallback sort),
        // and one top byte with small ids (the insertion sorts).
        let one_sub: Vec<(u64, u64)> =
            (0..3_000u64).map(|i| (0xab00_0000_0000_0000 | mix64(i) >> 16, i)).collect();
        check(&one_sub);
        let small: Vec<(u64, u64)> = (0..3_000u64).map(|i| ((3_000 - i) * 7, i)).collect();
        check(&small);
    }

    #[test]
    fn reused_buffers_with_stale_tails_sort_the_new_input_only() {
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        let big: Vec<(u64, u64)> = (1..=20_000u64).map(|i| (mix64(i), i)).collect();
        sort_by_id(&big, &mut out, &mut scratch);
        let small: Vec<(u64, u64)> = (1..=500u64).map(|i| (mix64(i + 1_000_000), i)).collect();
        sort_by_id(&small, &mut out, &mut scratch);
        let mut want = small.clone();
        want.sort_unstable();
        assert_eq!(&out[..500], &want[..]);
    }
}
