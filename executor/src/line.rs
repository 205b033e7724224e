//! A worker's line: its local queue (a bounded ring that idle workers steal from, `queue.rs`)
//! continued by an unbounded backlog (`shared_fifo.rs`), so that tasks run in the order they
//! were queued however many are ready at once.
//!
//! Two rules keep the order: a newcomer joins the backlog while the backlog holds anything (or
//! the ring is full), so the ring only ever holds values older than the backlog's; and the
//! backlog's front moves to the ring's back, whenever the ring is at most half full. Stealers
//! take the ring's oldest half, or, when the ring is empty, the backlog's front — always the
//! front of the line. Modelled against a `VecDeque` with proptest below.

use crate::queue::{CAPACITY, Local, Overflow};
use crate::shared_fifo::SharedFifo;

/// Queues `value` at the back of the line. Returns `true` if it went to the backlog; `mark` is
/// applied to it first.
#[inline]
pub(crate) fn push_back<T>(
    local: &mut Local<T>,
    backlog: &SharedFifo<T>,
    value: T,
    mark: impl Fn(&T),
) -> bool {
    let spill = Spill { backlog, mark };
    if backlog.is_empty() {
        local.push_back(value, &spill)
    } else {
        spill.push(value);
        true
    }
}

/// Moves the backlog's front into the ring if the ring is at most half full.
#[inline]
pub(crate) fn refill<T>(local: &mut Local<T>, backlog: &SharedFifo<T>) {
    if !backlog.is_empty() && local.len() <= CAPACITY / 2 {
        backlog.move_batch_into(CAPACITY / 2, local);
    }
}

/// The backlog as the ring's overflow.
struct Spill<'a, T, M> {
    backlog: &'a SharedFifo<T>,
    mark: M,
}

impl<T, M: Fn(&T)> Overflow<T> for Spill<'_, T, M> {
    fn push(&self, value: T) {
        (self.mark)(&value);
        self.backlog.push(value);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::collections::VecDeque;

    use proptest::prelude::*;

    use super::*;
    use crate::queue;

    #[derive(Clone, Debug)]
    enum Op {
        /// The owner queues `n` values (a reactor dispatch).
        Push(usize),
        /// The owner runs `n` values (refill, then pop).
        Pop(usize),
        /// An idle worker steals: half the ring, else a batch from the backlog's front.
        Steal,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1..700usize).prop_map(Op::Push),
            (1..400usize).prop_map(Op::Pop),
            Just(Op::Steal),
        ]
    }

    proptest! {
        /// Whatever the mix of pushes, pops and steals, the owner pops values in the order they
        /// were pushed (skipping only what was stolen), and a steal takes the line's front.
        #[test]
        fn the_line_keeps_the_order(ops in proptest::collection::vec(op(), 1..40)) {
            let (steal, mut local) = queue::local::<u64>();
            let backlog = SharedFifo::new();
            let (_s, mut thief) = queue::local::<u64>();
            let mut model: VecDeque<u64> = VecDeque::new();
            let mut next = 0u64;
            for op in ops {
                match op {
                    Op::Push(n) => {
                        for _ in 0..n {
                            push_back(&mut local, &backlog, next, |_| {});
                            model.push_back(next);
                            next += 1;
                        }
                    }
                    Op::Pop(n) => {
                        for _ in 0..n {
                            refill(&mut local, &backlog);
                            let got = local.pop();
                            prop_assert_eq!(got, model.pop_front());
                        }
                    }
                    Op::Steal => {
                        let stolen: Vec<u64> = steal
                            .steal_into(&mut thief)
                            .or_else(|| {
                                let half = backlog.len().div_ceil(2).min(CAPACITY / 2);
                                backlog.pop_batch_into(half.saturating_sub(1), &mut thief)
                            })
                            .into_iter()
                            .chain(std::iter::from_fn(|| thief.pop()))
                            .collect();
                        let mut stolen_sorted = stolen.clone();
                        stolen_sorted.sort_unstable();
                        let front: Vec<u64> = model.drain(..stolen.len()).collect();
                        prop_assert_eq!(stolen_sorted, front, "a steal takes the front");
                    }
                }
                prop_assert_eq!(local.len() + backlog.len(), model.len());
            }
        }
    }
}
