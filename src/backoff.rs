//! The service's one backoff: a pause that doubles after every failure in a row, up to a
//! bound. The executor's duties restarting after a panic, a savepoint lease renewal that
//! failed, a cluster's schedules whose pass panicked: each a [`Backoff`] of its own bounds.
//! (SQL has its one formula too: the fragment `backoff_ms` of `store/sql/fragments/`.)

use std::time::Duration;

/// A pause of `first` after a first failure, doubled after each further failure in a row,
/// never more than `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Backoff {
    pub const fn new(first: Duration, max: Duration) -> Self {
        Backoff { first, max }
    }

    /// The pause after `before` failures in a row before this one: `first` doubled `before`
    /// times, at most `max` (and no overflow, however many failures).
    pub fn pause(&self, before: u32) -> Duration {
        self.first
            .saturating_mul(2u32.saturating_pow(before))
            .min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_doubles_from_the_first_up_to_the_bound() {
        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        let pauses: Vec<u64> = (0..8).map(|n| b.pause(n).as_secs()).collect();
        assert_eq!(pauses, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(b.pause(u32::MAX), Duration::from_secs(60));
        let tight = Backoff::new(Duration::from_millis(500), Duration::from_millis(300));
        assert_eq!(
            tight.pause(0),
            Duration::from_millis(300),
            "the bound holds from the first"
        );
    }
}
