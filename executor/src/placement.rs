//! Placement: which worker — and so which worker's reactor — a thread, a connection or a NIC
//! receive queue goes to. The one home of the three policies; the worker, the runtime's
//! handle, `weir_net`'s TCP accept path and its `ShardedListener` all ask here.
//!
//! * **A thread that is not a worker** (`block_on`, the blocking pool, `Runtime::enter`, a
//!   worker's thread blocked in `block_in_place`): `reactor_for_thread` — a worker of the
//!   runtime uses its own reactor; any other thread takes the workers' reactors in turn
//!   (round-robin), skipping those nobody turns right now (a worker stalled in
//!   `block_in_place`).
//! * **An accepted TCP connection** on a worker of a multi-worker runtime:
//!   [`for_accepted_connection`] — of two reactors, the accepting worker's and one peer's (a
//!   different peer each time), the one with fewer registrations (the accepting worker's on a
//!   tie), so a listener's connections spread over every worker's epoll at a cost that does
//!   not grow with the number of workers; the connection's task follows at its first
//!   wake-up. A peer stuck in one poll (it has not turned its reactor for 500 µs and is not
//!   parked) is never chosen.
//! * **A NIC receive queue (NAPI id)** seen by a `ShardedListener`: [`NapiOwners`] — a new id
//!   goes to the worker owning the fewest ids, and keeps it.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

use weir_reactor::for_executor::ReactorControl;

use crate::context;
use crate::shared::Shared;

/// The reactor a thread uses for its timers and I/O while it is in the runtime of `shared`: a
/// worker of that runtime its own; any other thread the next worker's in turn, skipping
/// stalled ones (all stalled: the next one anyway).
pub(crate) fn reactor_for_thread(shared: &Shared) -> &weir_reactor::ReactorHandle {
    let own = context::with_worker(|cx| {
        cx.filter(|cx| std::ptr::eq(&*cx.shared, shared))
            .map(|cx| cx.index)
    });
    if let Some(i) = own
        && i < shared.remotes.len()
    {
        return &shared.remotes[i].reactor;
    }
    let n = shared.remotes.len();
    let start = shared.next_reactor.fetch_add(1, Ordering::Relaxed);
    (0..n)
        .map(|k| &shared.remotes[(start + k) % n])
        .find(|r| !r.stalled.load(Ordering::Relaxed))
        .map_or(&shared.remotes[start % n].reactor, |r| &r.reactor)
}

/// For a connection accepted on a worker of a multi-worker runtime: the current worker's
/// reactor, or the peer's whose turn it is if that one has fewer registrations. `None` elsewhere
/// (off the workers, or with a single worker), where the connection goes to the current
/// reactor.
pub fn for_accepted_connection() -> Option<weir_reactor::ReactorHandle> {
    let me = context::current_worker_index()?;
    context::with_current(|shared| {
        let remotes = &shared?.remotes;
        if remotes.len() < 2 || me >= remotes.len() {
            return None;
        }
        let turn = NEXT_PEER.with(|t| {
            let turn = t.get();
            t.set(turn.wrapping_add(1));
            turn
        });
        let w = two_choices(me, remotes.len(), turn, |w| {
            remotes[w].reactor.registrations()
        });
        // A peer stuck in one poll would leave the connection waiting until it returns (or
        // until someone collects its events for it): keep the connection here.
        let w = if w != me && remotes[w].reactor.is_stuck(PEER_STUCK) {
            me
        } else {
            w
        };
        Some(remotes[w].reactor.clone())
    })
}

/// A peer that has not turned its reactor for this long, while not parked, is stuck: no
/// accepted connection goes to it (the I/O-stealing threshold of busy workers).
const PEER_STUCK: std::time::Duration = std::time::Duration::from_micros(500);

thread_local! {
    /// The accepting thread's count of placed connections: which peer the next one is compared
    /// with.
    static NEXT_PEER: Cell<usize> = const { Cell::new(0) };
}

/// Worker `me` of `n` (`n ≥ 2`), or peer number `turn` in the rotation of the others if its
/// `count` is strictly lower.
///
/// Two reads of a registration count per accepted connection, however many workers there are:
/// each count changes with every registration of its reactor, so reading all of them cost one
/// cache miss per worker and per connection on the accepting core (and they were read under
/// each reactor's lock). Each connection still goes to the less loaded of two reactors, and the
/// rotation brings every peer in turn, which keeps the counts within a few of each other.
fn two_choices(me: usize, n: usize, turn: usize, count: impl Fn(usize) -> usize) -> usize {
    let peer = (me + 1 + turn % (n - 1)) % n;
    if count(peer) < count(me) { peer } else { me }
}

/// NAPI id → owning worker, for NAPI-sharded accept (`weir_net::ShardedListener`).
///
/// A new id goes to the worker that owns the **fewest ids** (ties: fewer live connections, then
/// the accepting worker, then the lowest index) and **keeps it** for the life of the map, so
/// while there are no more ids than workers each worker's epoll holds the sockets of at most
/// one receive queue, and owned-id counts never differ by more than one.
#[derive(Debug)]
pub struct NapiOwners {
    owner: HashMap<u32, usize>,
    /// Ids per worker, in assignment order.
    owned: Vec<Vec<u32>>,
}

impl NapiOwners {
    /// An empty map for `workers` workers.
    pub fn new(workers: usize) -> NapiOwners {
        NapiOwners {
            owner: HashMap::new(),
            owned: vec![Vec::new(); workers],
        }
    }

    /// The owner of `id`, assigning it on first sight (`accepting`: the worker that accepted
    /// the connection; `live(w)`: worker `w`'s live connections); `true` if it was new.
    ///
    /// # Panics
    /// If the map has no workers.
    pub fn owner_of(
        &mut self,
        id: u32,
        accepting: usize,
        live: impl Fn(usize) -> u64,
    ) -> (usize, bool) {
        if let Some(&w) = self.owner.get(&id) {
            return (w, false);
        }
        let key = |w: usize| (self.owned[w].len(), live(w), usize::from(w != accepting), w);
        let w = (0..self.owned.len())
            .min_by_key(|&w| key(w))
            .expect("at least one worker");
        self.owner.insert(id, w);
        self.owned[w].push(id);
        (w, true)
    }

    /// The worker that owns `id`, if it has been seen.
    pub fn owner(&self, id: u32) -> Option<usize> {
        self.owner.get(&id).copied()
    }

    /// The ids worker `worker` owns, in the order they were assigned.
    ///
    /// # Panics
    /// If `worker` is not a worker of the map.
    pub fn owned(&self, worker: usize) -> &[u32] {
        &self.owned[worker]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_choices_take_the_lower_of_self_and_the_peer_in_turn() {
        // Two workers: the peer is always the other one; ties stay home.
        assert_eq!(two_choices(0, 2, 0, |w| [5, 4][w]), 1);
        assert_eq!(two_choices(0, 2, 7, |w| [4, 4][w]), 0);
        assert_eq!(two_choices(1, 2, 3, |w| [3, 4][w]), 0);
        // Four workers: the peers of worker 1 in turn are 2, 3, 0, 2, …
        let peers: Vec<usize> = (0..4)
            .map(|t| two_choices(1, 4, t, |w| usize::from(w != 1)))
            .collect();
        assert_eq!(peers, [1, 1, 1, 1]);
        let peers: Vec<usize> = (0..4)
            .map(|t| two_choices(1, 4, t, |w| usize::from(w == 1)))
            .collect();
        assert_eq!(peers, [2, 3, 0, 2]);
    }

    /// Every connection accepted on one worker of eight, each placed by two choices: the
    /// counts stay within a few of each other, from an even start and from a lopsided one.
    #[test]
    fn two_choices_keep_the_counts_even() {
        for start in [[0usize; 8], [400, 0, 0, 0, 0, 0, 0, 0]] {
            let mut counts = start;
            for turn in 0..10_000 {
                let w = two_choices(0, 8, turn, |w| counts[w]);
                counts[w] += 1;
                // Connections end too: the oldest worker's, in turn.
                if turn % 3 == 0 {
                    let w = turn / 3 % 8;
                    counts[w] = counts[w].saturating_sub(1);
                }
            }
            let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            assert!(max - min <= 8, "{counts:?} from {start:?}");
        }
    }

    fn live(counts: &[u64]) -> impl Fn(usize) -> u64 + '_ {
        |w| counts[w]
    }

    #[test]
    fn new_ids_go_to_the_worker_with_fewest_ids_and_stay() {
        let mut m = NapiOwners::new(2);
        let c = [0, 0];
        // First id: both own none; the accepting worker wins the tie.
        assert_eq!(m.owner_of(260, 1, live(&c)), (1, true));
        // Second id accepted by worker 1 again: worker 0 owns fewer ids.
        assert_eq!(m.owner_of(262, 1, live(&c)), (0, true));
        // Known ids keep their owner whoever accepts them.
        assert_eq!(m.owner_of(260, 0, live(&c)), (1, false));
        assert_eq!(m.owner_of(262, 1, live(&c)), (0, false));
        assert_eq!(m.owner(260), Some(1));
        assert_eq!(m.owner(1), None);
    }

    #[test]
    fn more_ids_than_workers_stay_balanced() {
        let mut m = NapiOwners::new(3);
        let c = [0, 0, 0];
        for id in 1..=10u32 {
            m.owner_of(id, (id % 3) as usize, live(&c));
        }
        let counts: Vec<usize> = (0..3).map(|w| m.owned(w).len()).collect();
        assert_eq!(counts.iter().sum::<usize>(), 10);
        assert!(
            counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
            "{counts:?}"
        );
    }

    #[test]
    fn ties_on_ids_go_to_fewer_live_connections() {
        let mut m = NapiOwners::new(3);
        let c = [5, 2, 9];
        assert_eq!(m.owner_of(7, 0, live(&c)), (1, true));
    }
}
