//! What the plan benchmarks share: rounds of the default concurrency against a sequential
//! stack, alternating which goes first, with the median of each.

use std::time::Duration;

/// Runs `rounds` rounds of `concurrent` and `sequential` (the first of a round alternating),
/// prints each round and the medians, and returns the medians.
pub fn compare(
    rounds: usize,
    mut concurrent: impl FnMut(usize) -> Duration,
    mut sequential: impl FnMut(usize) -> Duration,
) -> (Duration, Duration) {
    let (mut c, mut s) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        if round % 2 == 0 {
            c.push(concurrent(round));
            s.push(sequential(round));
        } else {
            s.push(sequential(round));
            c.push(concurrent(round));
        }
        println!(
            "round {round}: default {:?}, sequential {:?}",
            c[round], s[round]
        );
    }
    c.sort();
    s.sort();
    let (c, s) = (c[rounds / 2], s[rounds / 2]);
    println!(
        "median of {rounds}: default {c:?}, sequential {s:?}: {:.1}x faster",
        s.as_secs_f64() / c.as_secs_f64()
    );
    (c, s)
}
