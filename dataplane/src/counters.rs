//! One declaration per set of counters: [`counter_set!`](crate::counter_set) turns a list of
//! fields into the plain `Copy` snapshot (with its field-wise sum and its `(key, value)` pairs
//! for logs and metrics) and, when asked, the `AtomicU64` mirror a writer thread publishes into
//! and a reader thread loads from. [`log_counters!`](crate::log_counters) writes one log line
//! from the same list, so a counter added to a list reaches the snapshot, the mirror, the sum,
//! the log line and the `fields()` a metric loop reads, with nothing else to edit.
//!
//! A list that both a struct and a log line need is kept in one "list macro" that hands the
//! fields to whichever macro it is given (see
//! [`measure_counters!`](crate::measure_counters)); a list used once is written inline.

/// Re-exported for the macros' expansions in other crates.
#[doc(hidden)]
pub use std::sync::atomic::{AtomicU64 as __AtomicU64, Ordering as __Ordering};

/// Declares a set of `u64` counters once.
///
/// ```
/// wirelat_dataplane::counter_set! {
///     /// What the example counts.
///     #[derive(serde::Serialize)]
///     pub struct Totals;
///     /// The atomic mirror of [`Totals`] (optional).
///     pub atomic struct SharedTotals;
///     {
///         /// Frames seen (logged as `seen`).
///         frames => seen,
///         /// Frames dropped.
///         dropped => dropped,
///     }
/// }
/// let shared = SharedTotals::default();
/// shared.publish(&Totals { frames: 3, dropped: 1 });
/// let mut sum = shared.snapshot();
/// sum.add(&Totals { frames: 1, dropped: 0 });
/// assert_eq!(sum.fields(), [("seen", 4), ("dropped", 1)]);
/// ```
///
/// Each field is `name => key`: `name` is the field of both structs, `key` the name logs and
/// metrics use for it ([`fields`](#fields) and [`log_counters!`](crate::log_counters)), in
/// list order. The snapshot derives `Clone, Copy, Debug, Default, PartialEq, Eq` (more through
/// its attributes) and gets `add` (wrapping field-wise sum: totals over workers), `KEYS` and
/// `fields()`. The mirror (`atomic struct`, optional) has one public `AtomicU64` per field, for
/// writers that count into it directly, and `publish` (relaxed stores of a snapshot: for a single
/// writer that keeps plain counts and publishes per burst) and `snapshot` (relaxed loads: each
/// value is exact, the set is not one instant).
#[macro_export]
macro_rules! counter_set {
    (
        $(#[$smeta:meta])* $svis:vis struct $Snap:ident;
        $(#[$ameta:meta])* $avis:vis atomic struct $Atomic:ident;
        { $( $(#[$fmeta:meta])* $field:ident => $key:ident ),+ $(,)? }
    ) => {
        $crate::counter_set! {
            $(#[$smeta])* $svis struct $Snap;
            { $( $(#[$fmeta])* $field => $key ),+ }
        }

        $(#[$ameta])*
        #[derive(Debug, Default)]
        $avis struct $Atomic {
            $( $(#[$fmeta])* pub $field: $crate::counters::__AtomicU64, )+
        }

        impl $Atomic {
            /// Stores every counter of `s` (relaxed plain stores: the caller is the only writer).
            pub fn publish(&self, s: &$Snap) {
                $( self.$field.store(s.$field, $crate::counters::__Ordering::Relaxed); )+
            }

            /// Reads every counter (relaxed: each value is exact, the set is not one instant).
            pub fn snapshot(&self) -> $Snap {
                $Snap { $( $field: self.$field.load($crate::counters::__Ordering::Relaxed), )+ }
            }
        }
    };
    (
        $(#[$smeta:meta])* $svis:vis struct $Snap:ident;
        { $( $(#[$fmeta:meta])* $field:ident => $key:ident ),+ $(,)? }
    ) => {
        $(#[$smeta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        $svis struct $Snap {
            $( $(#[$fmeta])* pub $field: u64, )+
        }

        impl $Snap {
            /// The name logs and metrics use for each counter, in declaration order.
            pub const KEYS: [&'static str; [$(stringify!($field)),+].len()] = [$(stringify!($key)),+];

            /// Field-wise sum (wrapping, like the counters themselves).
            pub fn add(&mut self, o: &Self) {
                $( self.$field = self.$field.wrapping_add(o.$field); )+
            }

            /// Every counter with its name ([`Self::KEYS`]), in declaration order.
            pub fn fields(&self) -> [(&'static str, u64); [$(stringify!($field)),+].len()] {
                [$( (stringify!($key), self.$field) ),+]
            }
        }
    };
}

/// Writes one `tracing` event whose fields are a counter set's keys and values, between the
/// caller's fields: `list!($crate::log_counters! { level, snapshot, [before], [after], "message" })`
/// where `list!` is a list macro such as [`measure_counters!`](crate::measure_counters) (it
/// appends the fields). `before` and `after` are `tracing` fields, each followed by a comma.
/// Field names of an event are fixed where it is written, so the line is expanded from the list
/// rather than built from `fields()` at run time.
#[macro_export]
macro_rules! log_counters {
    (
        $level:ident, $s:expr, [$($before:tt)*], [$($after:tt)*], $msg:literal
        { $( $(#[$fmeta:meta])* $field:ident => $key:ident ),+ $(,)? }
    ) => {
        ::tracing::$level!($($before)* $( $key = $s.$field, )+ $($after)* $msg)
    };
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    crate::counter_set! {
        /// A test set.
        pub struct Two;
        /// Its mirror.
        pub atomic struct SharedTwo;
        {
            /// First.
            a => first,
            /// Second.
            b => b,
        }
    }

    #[test]
    fn publish_then_snapshot_round_trips_each_field() {
        let shared = SharedTwo::default();
        shared.publish(&Two { a: 7, b: 9 });
        assert_eq!(shared.a.load(Ordering::Relaxed), 7);
        assert_eq!(shared.b.load(Ordering::Relaxed), 9);
        assert_eq!(shared.snapshot(), Two { a: 7, b: 9 });
    }

    #[test]
    fn add_is_field_wise_and_wraps() {
        let mut s = Two { a: u64::MAX, b: 2 };
        s.add(&Two { a: 2, b: 3 });
        assert_eq!(s, Two { a: 1, b: 5 });
    }

    #[test]
    fn fields_name_each_counter_by_its_key_in_order() {
        assert_eq!(Two::KEYS, ["first", "b"]);
        assert_eq!(Two { a: 4, b: 5 }.fields(), [("first", 4), ("b", 5)]);
    }
}
