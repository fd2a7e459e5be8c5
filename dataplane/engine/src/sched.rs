//! Per-connection scheduling without scans: a ready list (connections that may have
//! something to send) and an indexed timer heap (each connection's earliest deadline).
//!
//! Both are keyed by connection-table slot index (see [`crate::conn_table::slot_of`]), hold
//! at most one entry per slot, and are allocated once at construction for `max_conns`
//! slots: no allocation and no walk over idle connections on any call.

use std::collections::VecDeque;

use iwarp_types::Instant;

/// A FIFO of slots with at most one entry per slot (a second `push` of a queued slot is a
/// no-op). Bounded by the number of slots.
#[derive(Debug)]
pub struct ReadyList {
    queue: VecDeque<u32>,
    queued: Vec<bool>,
}

impl ReadyList {
    /// A list for `slots` slots.
    pub fn new(slots: usize) -> ReadyList {
        ReadyList {
            queue: VecDeque::with_capacity(slots),
            queued: vec![false; slots],
        }
    }

    /// Queues `slot` at the back unless it is already queued (or out of range).
    pub fn push(&mut self, slot: usize) {
        let Some(q) = self.queued.get_mut(slot) else {
            return;
        };
        if !*q {
            *q = true;
            // Cannot exceed the capacity: one entry per slot.
            self.queue.push_back(slot as u32);
        }
    }

    /// Takes the slot at the front.
    pub fn pop(&mut self) -> Option<usize> {
        let slot = self.queue.pop_front()? as usize;
        if let Some(q) = self.queued.get_mut(slot) {
            *q = false;
        }
        Some(slot)
    }

    /// Slots queued.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// True if nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether `slot` is queued.
    pub fn contains(&self, slot: usize) -> bool {
        self.queued.get(slot).copied().unwrap_or(false)
    }
}

/// Marks a slot with no heap entry.
const NONE: u32 = u32::MAX;

/// A binary min-heap of `(deadline, slot)` with at most one entry per slot, indexed so a
/// slot's deadline can be changed or removed in O(log n) (no lazy deletion, no growth).
#[derive(Debug)]
pub struct TimerHeap {
    heap: Vec<(Instant, u32)>,
    /// Position of each slot's entry in `heap`, or `NONE`.
    pos: Vec<u32>,
}

impl TimerHeap {
    /// A heap for `slots` slots.
    pub fn new(slots: usize) -> TimerHeap {
        TimerHeap {
            heap: Vec::with_capacity(slots),
            pos: vec![NONE; slots],
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True if no deadline is armed.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// The earliest deadline and its slot.
    pub fn peek(&self) -> Option<(Instant, usize)> {
        self.heap.first().map(|&(t, s)| (t, s as usize))
    }

    /// The deadline armed for `slot`.
    pub fn get(&self, slot: usize) -> Option<Instant> {
        let p = *self.pos.get(slot)?;
        self.heap.get(p as usize).map(|e| e.0)
    }

    /// Arms (`Some`), moves or disarms (`None`) the deadline of `slot`.
    pub fn set(&mut self, slot: usize, at: Option<Instant>) {
        let Some(&p) = self.pos.get(slot) else {
            return;
        };
        match (p, at) {
            (NONE, None) => {}
            (NONE, Some(t)) => {
                let i = self.heap.len();
                self.heap.push((t, slot as u32));
                self.pos[slot] = i as u32;
                self.sift_up(i);
            }
            (p, Some(t)) => {
                let i = p as usize;
                let old = self.heap[i].0;
                if t == old {
                    // Unchanged (the common case: most calls re-arm the same deadline).
                    return;
                }
                self.heap[i].0 = t;
                if t < old {
                    self.sift_up(i);
                } else {
                    self.sift_down(i);
                }
            }
            (p, None) => self.remove_at(p as usize),
        }
    }

    fn remove_at(&mut self, i: usize) {
        let last = self.heap.len() - 1;
        self.swap(i, last);
        if let Some((_, s)) = self.heap.pop() {
            self.pos[s as usize] = NONE;
        }
        if i < self.heap.len() {
            self.sift_down(i);
            self.sift_up(i);
        }
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[self.heap[a].1 as usize] = a as u32;
        self.pos[self.heap[b].1 as usize] = b as u32;
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[i].0 >= self.heap[parent].0 {
                break;
            }
            self.swap(i, parent);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < n && self.heap[l].0 < self.heap[m].0 {
                m = l;
            }
            if r < n && self.heap[r].0 < self.heap[m].0 {
                m = r;
            }
            if m == i {
                break;
            }
            self.swap(i, m);
            i = m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ns: u64) -> Instant {
        Instant(ns)
    }

    #[test]
    fn ready_list_is_a_set_in_fifo_order() {
        let mut r = ReadyList::new(4);
        r.push(2);
        r.push(0);
        r.push(2);
        r.push(9); // out of range: ignored
        assert_eq!(r.len(), 2);
        assert!(r.contains(2) && !r.contains(1));
        assert_eq!(r.pop(), Some(2));
        r.push(2);
        assert_eq!(r.pop(), Some(0));
        assert_eq!(r.pop(), Some(2));
        assert_eq!(r.pop(), None);
        assert!(r.is_empty());
    }

    #[test]
    fn heap_orders_moves_and_removes() {
        let mut h = TimerHeap::new(8);
        for (slot, at) in [(0, 50), (1, 10), (2, 30), (3, 20), (4, 40)] {
            h.set(slot, Some(t(at)));
        }
        assert_eq!(h.peek(), Some((t(10), 1)));
        h.set(1, Some(t(60))); // later
        assert_eq!(h.peek(), Some((t(20), 3)));
        h.set(4, Some(t(5))); // earlier
        assert_eq!(h.peek(), Some((t(5), 4)));
        h.set(3, None);
        h.set(7, None); // nothing armed: no-op
        h.set(99, Some(t(1))); // out of range: ignored
        assert_eq!(h.len(), 4);
        assert_eq!(h.get(3), None);
        assert_eq!(h.get(2), Some(t(30)));
        let mut order = Vec::new();
        while let Some((at, slot)) = h.peek() {
            order.push((at, slot));
            h.set(slot, None);
        }
        assert_eq!(order, vec![(t(5), 4), (t(30), 2), (t(50), 0), (t(60), 1)]);
        assert!(h.is_empty());
    }

    #[test]
    fn heap_matches_a_naive_minimum_under_churn() {
        // A deterministic pseudo-random sequence of arm / move / disarm.
        let mut h = TimerHeap::new(64);
        let mut naive: Vec<Option<u64>> = vec![None; 64];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..5_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let slot = (x % 64) as usize;
            let at = (x >> 8) % 1_000;
            let v = if x & 7 < 2 { None } else { Some(at) };
            h.set(slot, v.map(t));
            naive[slot] = v;
            let want = naive
                .iter()
                .enumerate()
                .filter_map(|(s, a)| a.map(|a| (a, s)))
                .min();
            let got = h.peek().map(|(i, s)| (i.as_nanos(), s));
            assert_eq!(got.map(|g| g.0), want.map(|w| w.0));
            assert_eq!(h.len(), naive.iter().flatten().count());
        }
    }
}
