//! The RDA's encodings. Three messages share the common 10-byte header (kind RDA, format
//! version, config fingerprint) and then a part tag:
//!
//! ```text
//! 0 epoch value   counters (6 × u64) | online: k·m buckets | late: set_size u64, len u32, len × u64
//! 1 bound banks   m u32 | k·m buckets                      (late binding, built at epoch end)
//! 2 cache export  entries u64 | entries × (id u64, ts_ns u64; u64::MAX: excluded, seen twice)
//! ```
//!
//! A bucket is three LE u64 in `Bucket` field order (ID, TS, Δ as two's complement). Every
//! length is checked against the configuration before anything is allocated; no input
//! panics. The cache is never part of the epoch value: it stays at the point (spec §6.4
//! step 9) and is exported only for retention or a collector.

use super::banks::{BUCKET_BYTES, BankHash, Banks, Bucket};
use super::cache::{CacheInsert, TimestampCache};
use super::config::{Binding, RdaConfig};
use super::sizing::MinHashSignature;
use super::{Rda, RdaCounters};
use crate::synopsis::codec::{self, DecodeError, Reader, Writer};
use crate::synopsis::{Synopsis, SynopsisConfig, SynopsisKind};

const PART_EPOCH: u8 = 0;
const PART_BANKS: u8 = 1;
const PART_CACHE: u8 = 2;

/// What an epoch value carries besides its counters.
pub(crate) enum EpochBody {
    Banks(Banks),
    Signature(MinHashSignature),
}

fn write_buckets(w: &mut Writer<'_>, b: &Banks) {
    w.reserve(b.bytes());
    for x in b.buckets() {
        w.u64(x.id_xor);
        w.u64(x.ts_sum_ns);
        w.i64(x.count);
    }
}

fn read_buckets(cfg: &RdaConfig, r: &mut Reader<'_>, m: usize) -> Result<Banks, DecodeError> {
    let n = cfg.k() * m;
    r.require(n.saturating_mul(BUCKET_BYTES))?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(Bucket { id_xor: r.u64()?, ts_sum_ns: r.u64()?, count: r.i64()? });
    }
    Ok(Banks::from_buckets(BankHash::new(cfg, m), v))
}

fn part(r: &mut Reader<'_>, want: u8) -> Result<(), DecodeError> {
    let p = r.u8()?;
    if p != want {
        return Err(DecodeError::Invalid {
            field: "part",
            reason: format!("expected part {want}, found {p}"),
        });
    }
    Ok(())
}

pub(crate) fn write_epoch_body(s: &Rda, w: &mut Writer<'_>) {
    w.u8(PART_EPOCH);
    let c = s.counters();
    for v in [c.seen, c.sampled_out, c.cached, c.duplicates, c.cache_full, c.duplicate_ids] {
        w.u64(v);
    }
    match s.banks() {
        Some(b) => write_buckets(w, b),
        None => {
            let sig = s.signature();
            w.u64(sig.set_size);
            w.u32(sig.mins.len() as u32);
            for v in &sig.mins {
                w.u64(*v);
            }
        }
    }
}

pub(crate) fn read_epoch_body(
    cfg: &RdaConfig,
    r: &mut Reader<'_>,
) -> Result<(RdaCounters, EpochBody), DecodeError> {
    part(r, PART_EPOCH)?;
    let counters = RdaCounters {
        seen: r.u64()?,
        sampled_out: r.u64()?,
        cached: r.u64()?,
        duplicates: r.u64()?,
        cache_full: r.u64()?,
        duplicate_ids: r.u64()?,
    };
    let body = match cfg.binding {
        Binding::Online { buckets_per_bank } => {
            EpochBody::Banks(read_buckets(cfg, r, buckets_per_bank as usize)?)
        }
        Binding::LateBinding { signature_len, .. } => {
            let set_size = r.u64()?;
            let len = r.u32()?;
            if len > signature_len {
                return Err(DecodeError::Invalid {
                    field: "signature.len",
                    reason: format!("{len} values, the configuration allows {signature_len}"),
                });
            }
            r.require(len as usize * 8)?;
            let mut mins = Vec::with_capacity(len as usize);
            for _ in 0..len {
                let v = r.u64()?;
                if mins.last().is_some_and(|&p| p >= v) {
                    return Err(DecodeError::Invalid {
                        field: "signature.mins",
                        reason: "values must be strictly ascending".into(),
                    });
                }
                mins.push(v);
            }
            if (len as u64) > set_size {
                return Err(DecodeError::Invalid {
                    field: "signature.set_size",
                    reason: format!("{set_size} ids cannot give {len} values"),
                });
            }
            EpochBody::Signature(MinHashSignature { set_size, mins })
        }
    };
    Ok((counters, body))
}

fn header(cfg: &RdaConfig, out: &mut Vec<u8>, part: u8) {
    let mut w = Writer::new(out);
    codec::write_header(&mut w, SynopsisKind::Rda, Rda::FORMAT_VERSION, cfg.fingerprint());
    w.u8(part);
}

fn open<'a>(cfg: &RdaConfig, bytes: &'a [u8], want: u8) -> Result<Reader<'a>, DecodeError> {
    let mut r = Reader::new(bytes);
    codec::read_header(&mut r, SynopsisKind::Rda, Rda::FORMAT_VERSION, cfg.fingerprint())?;
    part(&mut r, want)?;
    Ok(r)
}

/// Encodes late-bound banks (any m) for the decoding point.
pub fn encode_banks(cfg: &RdaConfig, banks: &Banks) -> Vec<u8> {
    let mut out = Vec::with_capacity(codec::HEADER_LEN + 5 + banks.bytes());
    header(cfg, &mut out, PART_BANKS);
    let mut w = Writer::new(&mut out);
    w.u32(banks.buckets_per_bank() as u32);
    write_buckets(&mut w, banks);
    out
}

/// Decodes banks written by [`encode_banks`] under `cfg`; m must lie within the configured
/// late-binding bounds (the online m in online mode).
pub fn decode_banks(cfg: &RdaConfig, bytes: &[u8]) -> Result<Banks, DecodeError> {
    cfg.validate().map_err(|e| DecodeError::Invalid { field: "config", reason: e.to_string() })?;
    let mut r = open(cfg, bytes, PART_BANKS)?;
    let m = r.u32()? as usize;
    let (lo, hi, _, _) = super::sizing::margins(cfg);
    if m < lo.min(hi) || m > hi {
        return Err(DecodeError::Invalid {
            field: "buckets_per_bank",
            reason: format!("{m} is outside the configured {lo}..={hi}"),
        });
    }
    let b = read_buckets(cfg, &mut r, m)?;
    r.finish()?;
    Ok(b)
}

/// Exports a cache (for retention on disk or a collector that answers look-ups).
pub fn encode_cache(cfg: &RdaConfig, cache: &TimestampCache) -> Vec<u8> {
    let mut out = Vec::with_capacity(codec::HEADER_LEN + 9 + 16 * cache.len());
    header(cfg, &mut out, PART_CACHE);
    let mut w = Writer::new(&mut out);
    w.u64(cache.len() as u64);
    for (id, ts) in cache.iter() {
        w.u64(id);
        w.u64(ts);
    }
    out
}

/// Reads a cache export: at most `cfg.cache_capacity` entries, ids non-zero and distinct.
/// The cache is sized to the entries it holds.
pub fn decode_cache(cfg: &RdaConfig, bytes: &[u8]) -> Result<TimestampCache, DecodeError> {
    let mut r = open(cfg, bytes, PART_CACHE)?;
    let n = r.u64()?;
    if n > cfg.cache_capacity {
        return Err(DecodeError::Invalid {
            field: "cache.entries",
            reason: format!("{n} entries, the configuration allows {}", cfg.cache_capacity),
        });
    }
    let n = n as usize;
    r.require(n.saturating_mul(16))?;
    let mut c = TimestampCache::new(n, cfg.cache_seed());
    for _ in 0..n {
        let (id, ts) = (r.u64()?, r.u64()?);
        if id == 0 {
            return Err(DecodeError::Invalid { field: "cache.id", reason: "id 0 is reserved".into() });
        }
        if c.insert(id, ts) != CacheInsert::Inserted {
            return Err(DecodeError::Invalid { field: "cache.id", reason: format!("id {id:#x} repeated") });
        }
    }
    r.finish()?;
    Ok(c)
}
