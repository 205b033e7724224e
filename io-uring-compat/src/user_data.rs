//! What a request's `user_data` says: which kind of request it is (a readiness poll, the wake
//! handle's poll, a cancellation, an ahead request) and, for a poll or an ahead request, which
//! slot of the owner's table it belongs to.
//!
//! ```text
//! bits 63..62  kind: 0 = poll, 1 = wake poll, 2 = cancel, 3 = ahead (multishot receive or accept)
//! bits 61..32  generation of the poll slot (30 bits)
//! bits 31..0   index of the poll slot
//! ```
//!
//! The slot's generation changes whenever a slot is reused, so a completion of a poll whose
//! slot was freed and taken by another registration (an fd closed and its number reused) is
//! recognised and dropped. The caller's token lives in the slot, not in `user_data`: a
//! re-registration of the same token (new interest) must be told apart from the poll it
//! replaces, whose last completion may still be on its way.

/// The kind of request a completion belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A registration's multishot poll: slot index and generation.
    Poll { index: u32, generation: u32 },
    /// The wake handle's multishot poll.
    Wake,
    /// An `ASYNC_CANCEL` request (its completion carries nothing we need).
    Cancel,
    /// A registration's ahead request (multishot receive or accept): its slot's index and
    /// generation.
    Ahead { index: u32, generation: u32 },
}

const KIND_SHIFT: u32 = 62;
const POLL: u64 = 0;
const WAKE: u64 = 1;
const CANCEL: u64 = 2;
const AHEAD: u64 = 3;
/// Generations wrap at this many bits.
pub(crate) const GENERATION_MASK: u32 = (1 << 30) - 1;

pub(crate) fn poll(index: u32, generation: u32) -> u64 {
    (POLL << KIND_SHIFT) | (u64::from(generation & GENERATION_MASK) << 32) | u64::from(index)
}

pub(crate) fn ahead(index: u32, generation: u32) -> u64 {
    (AHEAD << KIND_SHIFT) | (u64::from(generation & GENERATION_MASK) << 32) | u64::from(index)
}

pub(crate) const WAKE_POLL: u64 = WAKE << KIND_SHIFT;
pub(crate) const CANCEL_REQ: u64 = CANCEL << KIND_SHIFT;

pub(crate) fn decode(user_data: u64) -> Kind {
    match user_data >> KIND_SHIFT {
        POLL => Kind::Poll {
            index: user_data as u32,
            generation: (user_data >> 32) as u32 & GENERATION_MASK,
        },
        WAKE => Kind::Wake,
        AHEAD => Kind::Ahead {
            index: user_data as u32,
            generation: (user_data >> 32) as u32 & GENERATION_MASK,
        },
        _ => Kind::Cancel,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for (i, g) in [(0, 0), (7, 3), (u32::MAX, GENERATION_MASK)] {
            assert_eq!(
                decode(poll(i, g)),
                Kind::Poll {
                    index: i,
                    generation: g
                }
            );
        }
        assert_eq!(decode(WAKE_POLL), Kind::Wake);
        assert_eq!(decode(CANCEL_REQ), Kind::Cancel);
        assert_eq!(
            decode(ahead(9, 5)),
            Kind::Ahead {
                index: 9,
                generation: 5
            }
        );
        // Generations wrap inside their field and never spill into the kind.
        assert!(matches!(decode(poll(1, u32::MAX)), Kind::Poll { .. }));
    }
}
