//! The ratio budget's sliding window, lock-free: one balance, and a ring of time slots that remember what each
//! slot added to the balance so it can be taken back when the slot leaves the window.
//!
//! Time is cut into *epochs* (slots of `window / SLOTS`); the window is the last [`SLOTS`] epochs. The balance is
//! kept equal to `reserve + sum of the live slots' nets`, so a withdrawal needs one compare-and-swap on the
//! balance — exact under contention: of many threads racing for the last retry, exactly one gets it — instead of
//! summing the ring.
//!
//! Each slot is one `AtomicU64`: the epoch it belongs to (as the lap `epoch / SLOTS` in the high 32 bits; the
//! slot's index gives the rest) and its net in the low 32 bits (an `i32` of fixed-point units). Relabelling a
//! slot to a newer epoch and zeroing its net is one compare-and-swap, and the thread whose swap wins takes the
//! old net out of the balance: every slot's contribution leaves the balance exactly once, whoever expires it.
//!
//! `head` is the newest epoch whose expiry is complete: a thread that moves it forward first relabels the slots
//! of every epoch it passes, then publishes (release); a thread that reads `head >= e` (acquire) therefore sees
//! the balance without anything that left the window by epoch `e`.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::cache_line::OwnCacheLine;

/// Slots in the window: the window slides in steps of a tenth of its length.
pub(super) const SLOTS: u64 = 10;
/// The latest epoch a slot can name (its lap must fit in 32 bits); later times are clamped to it.
pub(super) const MAX_EPOCH: u64 = u32::MAX as u64 * SLOTS + (SLOTS - 1);

/// A balance over a sliding window of [`SLOTS`] epochs. Units are the caller's (the ratio budget's 1/1000s).
#[derive(Debug)]
pub(super) struct Ledger {
    /// Newest epoch whose expiry is complete.
    head: OwnCacheLine<AtomicU64>,
    /// `reserve + nets of the live slots`. Negative only while retries granted against deposits that have since
    /// left the window are themselves still inside it (they are repaid when they leave).
    balance: AtomicI64,
    slots: [AtomicU64; SLOTS as usize],
}

fn index(epoch: u64) -> usize {
    // The remainder is below SLOTS (10): the cast is lossless.
    (epoch % SLOTS) as usize
}

fn pack(epoch: u64, net: i32) -> u64 {
    debug_assert!(epoch <= MAX_EPOCH);
    ((epoch / SLOTS) << 32) | u64::from(net as u32)
}

/// The slot's epoch and net. The slot at `index` holds epochs congruent to `index`.
fn unpack(word: u64, index: usize) -> (u64, i32) {
    // Low 32 bits reinterpreted as the i32 `pack` stored: truncation is the point.
    let net = word as u32 as i32;
    ((word >> 32) * SLOTS + index as u64, net)
}

impl Ledger {
    /// An empty window over a balance of `reserve`.
    pub(super) fn new(reserve: i64) -> Self {
        Ledger {
            head: OwnCacheLine(AtomicU64::new(0)),
            balance: AtomicI64::new(reserve),
            // Slot i starts labelled epoch i (lap 0) with nothing in it.
            slots: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// The balance now (may be negative, see the field).
    pub(super) fn balance(&self) -> i64 {
        self.balance.load(Ordering::Relaxed)
    }

    /// Slides the window so that it ends at `epoch` (no-op when it already ends there or later) and returns the
    /// epoch it ends at: the latest epoch seen.
    pub(super) fn advance(&self, epoch: u64) -> u64 {
        let head = self.head.load(Ordering::Acquire);
        if epoch <= head {
            return head;
        }
        // Epochs (head, epoch] enter the window; at most SLOTS of them matter, older ones were overwritten anyway.
        let first = head.max(epoch.saturating_sub(SLOTS)) + 1;
        for entering in first..=epoch {
            self.relabel(entering);
        }
        self.head.fetch_max(epoch, Ordering::AcqRel).max(epoch)
    }

    /// Makes the slot of `epoch` hold `epoch`, taking what an older epoch left in it out of the balance.
    fn relabel(&self, epoch: u64) {
        let i = index(epoch);
        let slot = &self.slots[i];
        let mut word = slot.load(Ordering::Acquire);
        loop {
            let (held, net) = unpack(word, i);
            if held >= epoch {
                return; // another thread got here first
            }
            match slot.compare_exchange_weak(word, pack(epoch, 0), Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    self.balance.fetch_sub(i64::from(net), Ordering::AcqRel);
                    return;
                }
                Err(current) => word = current,
            }
        }
    }

    /// Adds `units` earned at `epoch`. Returns `false` (nothing added) when `epoch` already lies outside the
    /// window (a late arrival from a thread whose clock read lost a race: it would already have aged out) or
    /// when the slot's net would overflow (over two million retries' worth in one slot: dropping is the
    /// conservative choice).
    pub(super) fn credit(&self, epoch: u64, units: i32) -> bool {
        self.advance(epoch);
        let i = index(epoch);
        let slot = &self.slots[i];
        let mut word = slot.load(Ordering::Acquire);
        loop {
            let (held, net) = unpack(word, i);
            // After `advance`, the slot holds `epoch` or, when `epoch` is older than the window, a newer one.
            if held != epoch {
                return false;
            }
            let Some(net) = net.checked_add(units) else {
                return false;
            };
            match slot.compare_exchange_weak(word, pack(held, net), Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(current) => word = current,
            }
        }
        // Should the slot expire between the swap above and this add, the expiry already took `units` out:
        // the balance dips for a moment and ends right.
        self.balance.fetch_add(i64::from(units), Ordering::AcqRel);
        true
    }

    /// Takes `units` at `epoch` if the balance holds them. The debit is booked at the latest epoch seen (not at
    /// `epoch`, which may be older), so it is given back no sooner than if it had been taken then.
    pub(super) fn try_debit(&self, epoch: u64, units: i32) -> bool {
        let latest = self.advance(epoch);
        let amount = i64::from(units);
        let taken = self
            .balance
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |balance| {
                (balance >= amount).then(|| balance - amount)
            });
        if taken.is_err() {
            return false;
        }
        let i = index(latest);
        let slot = &self.slots[i];
        let mut word = slot.load(Ordering::Acquire);
        loop {
            let (held, net) = unpack(word, i);
            // `head >= latest`, so the slot holds `latest` or, if the window moved on meanwhile, a newer epoch:
            // booking there keeps the debit longer, never shorter.
            debug_assert!(held >= latest);
            let Some(net) = net.checked_sub(units) else {
                // Over two million retries' worth in one slot: give the units back and refuse.
                self.balance.fetch_add(amount, Ordering::AcqRel);
                return false;
            };
            match slot.compare_exchange_weak(word, pack(held, net), Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(current) => word = current,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_round_trips_epoch_and_net() {
        for (epoch, net) in [
            (0, 0),
            (7, -1),
            (13, i32::MIN),
            (MAX_EPOCH, i32::MAX),
            (1234, 200),
        ] {
            assert_eq!(unpack(pack(epoch, net), index(epoch)), (epoch, net));
        }
    }

    #[test]
    fn a_slot_gives_back_what_it_held_when_it_leaves_the_window() {
        let ledger = Ledger::new(0);
        assert!(ledger.credit(3, 500));
        assert!(ledger.try_debit(5, 300));
        assert_eq!(ledger.balance(), 200);
        // Epoch 13: epoch 3 has left the window (live: 4..=13), epoch 5 has not.
        ledger.advance(13);
        assert_eq!(ledger.balance(), -300);
        ledger.advance(15);
        assert_eq!(ledger.balance(), 0);
    }

    #[test]
    fn a_jump_far_ahead_clears_every_slot_once() {
        let ledger = Ledger::new(1_000);
        for epoch in 0..SLOTS {
            assert!(ledger.credit(epoch, 10));
        }
        assert_eq!(ledger.balance(), 1_100);
        assert_eq!(ledger.advance(MAX_EPOCH), MAX_EPOCH);
        assert_eq!(ledger.balance(), 1_000);
    }

    #[test]
    fn a_credit_older_than_the_window_is_dropped() {
        let ledger = Ledger::new(0);
        ledger.advance(20);
        assert!(!ledger.credit(10, 500));
        assert!(ledger.credit(11, 500));
        assert_eq!(ledger.balance(), 500);
    }

    #[test]
    fn a_late_debit_is_booked_at_the_latest_epoch() {
        let ledger = Ledger::new(1_000);
        ledger.advance(20);
        assert!(ledger.try_debit(12, 1_000));
        // Booked at 20, so still held at 29 although epoch 12 left the window at 22.
        ledger.advance(29);
        assert_eq!(ledger.balance(), 0);
        ledger.advance(30);
        assert_eq!(ledger.balance(), 1_000);
    }

    #[test]
    fn slot_overflow_is_refused_not_wrapped() {
        let ledger = Ledger::new(i64::MAX / 2);
        let mut debits = 0_u64;
        while ledger.try_debit(0, i32::MAX / 2) {
            debits += 1;
        }
        assert_eq!(debits, 2, "a third debit would overflow the slot's i32");
        assert!(ledger.credit(1, i32::MAX));
        assert!(!ledger.credit(1, 1));
    }
}
