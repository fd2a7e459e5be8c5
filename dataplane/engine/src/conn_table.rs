//! The connection table: a bounded slab of connections addressed by [`ConnId`], a 4-tuple
//! demultiplexing map (O(1), keyed SipHash so a peer cannot aim collisions), a dense list
//! of live connections for round-robin transmission, listeners, and local port choice.

use core::cell::Cell;
use core::hash::BuildHasher;
use std::collections::HashMap;

use iwarp_tcp::FourTuple;
use iwarp_types::{ConnId, Duration, Instant};
use siphasher::sip::SipHasher13;

/// Bits of a [`ConnId`] holding the slot index; the rest is a generation counter so an old
/// id never names a newer connection in the same slot.
const INDEX_BITS: u32 = 20;
const INDEX_MASK: u32 = (1 << INDEX_BITS) - 1;

/// Keyed SipHash-1-3 for the demux map (no randomness inside: the key comes from config).
#[derive(Clone, Copy, Debug)]
pub struct SipBuildHasher {
    k0: u64,
    k1: u64,
}

impl SipBuildHasher {
    /// From a 16-byte key.
    pub fn new(key: [u8; 16]) -> SipBuildHasher {
        let mut a = [0u8; 8];
        let mut b = [0u8; 8];
        a.copy_from_slice(&key[..8]);
        b.copy_from_slice(&key[8..]);
        // Different from the ISN use of the same secret.
        SipBuildHasher {
            k0: u64::from_le_bytes(a) ^ 0x6465_6d75_7820_6b30,
            k1: u64::from_le_bytes(b),
        }
    }
}

impl BuildHasher for SipBuildHasher {
    type Hasher = SipHasher13;
    fn build_hasher(&self) -> SipHasher13 {
        SipHasher13::new_with_keys(self.k0, self.k1)
    }
}

/// The slot index of a connection id (the key of the engine's ready list and timer heap).
pub fn slot_of(id: ConnId) -> usize {
    (id.0 & INDEX_MASK) as usize
}

struct Slot<C> {
    gen: u32,
    /// Position in `live`.
    live_pos: usize,
    conn: Option<C>,
}

/// The table is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableFull;

/// Bounded slab of connections with a 4-tuple index.
pub struct ConnTable<C> {
    slots: Vec<Slot<C>>,
    free: Vec<u32>,
    live: Vec<ConnId>,
    demux: HashMap<FourTuple, ConnId, SipBuildHasher>,
    /// The last answer of [`ConnTable::lookup_wire`] (a stream of segments names the
    /// same tuple again and again: no hashing then). Cleared by every insert and remove.
    last: Cell<Option<(WireTuple, ConnId)>>,
    cursor: usize,
}

/// A segment's 4-tuple as its frame carries it: the IPv4 source and destination
/// addresses and the TCP source and destination ports, compared as two integers. The
/// parsed [`FourTuple`] is built field by field, and comparing it to the cached one
/// loaded it in widths its stores could not forward (the lookup's stall, 3 % of a core
/// moving 64 KiB WRITEs at MTU 1500).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireTuple {
    ips: u64,
    ports: u32,
}

impl WireTuple {
    /// The tuple of a segment from `src` to `dst` whose TCP header starts `segment`;
    /// `None` if it is shorter than the two ports.
    #[inline]
    pub fn new(
        src: core::net::Ipv4Addr,
        dst: core::net::Ipv4Addr,
        segment: &[u8],
    ) -> Option<WireTuple> {
        let ports: [u8; 4] = segment.get(..4)?.try_into().ok()?;
        Some(WireTuple {
            ips: u64::from(src.to_bits()) << 32 | u64::from(dst.to_bits()),
            ports: u32::from_ne_bytes(ports),
        })
    }
}

impl<C> ConnTable<C> {
    /// A table of `max` connections; every structure is allocated here.
    pub fn new(max: usize, key: [u8; 16]) -> ConnTable<C> {
        let max = max.min(INDEX_MASK as usize + 1);
        ConnTable {
            slots: (0..max)
                .map(|_| Slot {
                    gen: 0,
                    live_pos: 0,
                    conn: None,
                })
                .collect(),
            free: (0..max as u32).rev().collect(),
            live: Vec::with_capacity(max),
            demux: HashMap::with_capacity_and_hasher(max, SipBuildHasher::new(key)),
            last: Cell::new(None),
            cursor: 0,
        }
    }

    /// Live connections.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// True if no connection is live.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Number of slots (the most connections at once).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The id of the live connection in slot `index`, if any.
    pub fn id_at_slot(&self, index: usize) -> Option<ConnId> {
        let slot = self.slots.get(index)?;
        slot.conn.as_ref()?;
        Some(ConnId((slot.gen << INDEX_BITS) | index as u32))
    }

    /// True if no slot is free.
    pub fn is_full(&self) -> bool {
        self.free.is_empty()
    }

    fn split(id: ConnId) -> (usize, u32) {
        ((id.0 & INDEX_MASK) as usize, id.0 >> INDEX_BITS)
    }

    /// Adds a connection reachable by `tuple`. Fails if full or the tuple is taken.
    pub fn insert(&mut self, tuple: FourTuple, conn: C) -> Result<ConnId, TableFull> {
        if self.demux.contains_key(&tuple) {
            return Err(TableFull);
        }
        let index = self.free.pop().ok_or(TableFull)?;
        let slot = &mut self.slots[index as usize];
        slot.gen = (slot.gen + 1) & (u32::MAX >> INDEX_BITS);
        let id = ConnId((slot.gen << INDEX_BITS) | index);
        slot.conn = Some(conn);
        slot.live_pos = self.live.len();
        self.live.push(id);
        self.demux.insert(tuple, id);
        self.last.set(None);
        Ok(id)
    }

    /// The connection with this id, if live.
    pub fn get(&self, id: ConnId) -> Option<&C> {
        let (i, gen) = Self::split(id);
        let slot = self.slots.get(i)?;
        if slot.gen != gen {
            return None;
        }
        slot.conn.as_ref()
    }

    /// The connection with this id, if live, mutable.
    pub fn get_mut(&mut self, id: ConnId) -> Option<&mut C> {
        let (i, gen) = Self::split(id);
        let slot = self.slots.get_mut(i)?;
        if slot.gen != gen {
            return None;
        }
        slot.conn.as_mut()
    }

    /// The connection of a 4-tuple (hashed: segments received go through
    /// [`ConnTable::lookup_wire`], which remembers the last answer).
    pub fn lookup(&self, tuple: &FourTuple) -> Option<ConnId> {
        self.demux.get(tuple).copied()
    }

    /// [`ConnTable::lookup`] of a received segment whose tuple is `tuple`, as its frame
    /// carries it `wire`: the same answer, found without hashing (or reading `tuple`)
    /// when the last segment looked up had the same octets.
    #[inline]
    pub fn lookup_wire(&self, wire: WireTuple, tuple: &FourTuple) -> Option<ConnId> {
        if let Some((w, id)) = self.last.get() {
            if w == wire {
                return Some(id);
            }
        }
        let id = self.lookup(tuple)?;
        self.last.set(Some((wire, id)));
        Some(id)
    }

    /// True if some connection uses `tuple`.
    pub fn contains_tuple(&self, tuple: &FourTuple) -> bool {
        self.demux.contains_key(tuple)
    }

    /// Removes a connection (its tuple is `tuple`).
    pub fn remove(&mut self, id: ConnId, tuple: &FourTuple) -> Option<C> {
        let (i, gen) = Self::split(id);
        let slot = self.slots.get_mut(i)?;
        if slot.gen != gen {
            return None;
        }
        let conn = slot.conn.take()?;
        let pos = slot.live_pos;
        self.live.swap_remove(pos);
        if let Some(moved) = self.live.get(pos).copied() {
            let (mi, _) = Self::split(moved);
            self.slots[mi].live_pos = pos;
        }
        if self.demux.get(tuple) == Some(&id) {
            self.demux.remove(tuple);
        }
        self.last.set(None);
        self.free.push(i as u32);
        Some(conn)
    }

    /// Live ids in table order (for sweeps that may remove: copy the id first).
    pub fn live_at(&self, pos: usize) -> Option<ConnId> {
        self.live.get(pos).copied()
    }

    /// The next live id in round-robin order (each call advances). `None` if empty.
    pub fn next_round_robin(&mut self) -> Option<ConnId> {
        if self.live.is_empty() {
            return None;
        }
        if self.cursor >= self.live.len() {
            self.cursor = 0;
        }
        let id = self.live[self.cursor];
        self.cursor += 1;
        Some(id)
    }
}

/// A listening port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listener {
    /// Port.
    pub port: u16,
    /// Most connections not yet accepted or rejected.
    pub backlog: usize,
    /// Connections not yet accepted or rejected.
    pub pending: usize,
}

/// Bounded listener table.
#[derive(Debug)]
pub struct Listeners {
    entries: Vec<Option<Listener>>,
    /// Ports whose listener was removed lately (as many as listeners, the oldest
    /// replaced): a SYN for one is dropped, not refused, for a grace period from the first
    /// such SYN, so that a peer whose application re-creates its listener (perftest's
    /// server does, between its two connections) gets in on the SYN's retransmission.
    closed: Vec<Option<Closed>>,
    /// Where the next closed port is written.
    closed_next: usize,
}

/// A port whose listener was removed.
#[derive(Clone, Copy, Debug)]
struct Closed {
    port: u16,
    /// The first SYN that found no listener there (the grace period starts then).
    first_syn: Option<Instant>,
}

/// Why `listen` failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenError {
    /// The port already has a listener.
    InUse,
    /// The listener table is full.
    TableFull,
    /// Port 0 or backlog 0.
    Invalid,
}

impl Listeners {
    /// A table of `max` listeners.
    pub fn new(max: usize) -> Listeners {
        Listeners {
            entries: vec![None; max],
            closed: vec![None; max],
            closed_next: 0,
        }
    }

    /// Adds a listener.
    pub fn listen(&mut self, port: u16, backlog: usize) -> Result<(), ListenError> {
        if port == 0 || backlog == 0 {
            return Err(ListenError::Invalid);
        }
        if self.get(port).is_some() {
            return Err(ListenError::InUse);
        }
        let free = self
            .entries
            .iter_mut()
            .find(|e| e.is_none())
            .ok_or(ListenError::TableFull)?;
        *free = Some(Listener {
            port,
            backlog,
            pending: 0,
        });
        self.forget_closed(port);
        Ok(())
    }

    fn forget_closed(&mut self, port: u16) {
        for c in self.closed.iter_mut() {
            if c.is_some_and(|c| c.port == port) {
                *c = None;
            }
        }
    }

    /// A SYN for `port` found no listener at `now`: true when it is refused (RST), false
    /// when it is dropped because the port's listener was removed less than `grace` before
    /// (counted from the first such SYN) and may come back.
    pub fn refuse_syn(&mut self, port: u16, now: Instant, grace: Duration) -> bool {
        let Some(c) = self
            .closed
            .iter_mut()
            .find(|c| c.is_some_and(|c| c.port == port))
        else {
            return true;
        };
        let Some(closed) = c.as_mut() else {
            return true;
        };
        let first = *closed.first_syn.get_or_insert(now);
        if now < first + grace {
            return false;
        }
        *c = None;
        true
    }

    /// Removes a listener; true if there was one.
    pub fn unlisten(&mut self, port: u16) -> bool {
        match self
            .entries
            .iter_mut()
            .find(|e| matches!(e, Some(l) if l.port == port))
        {
            Some(e) => {
                *e = None;
                if !self.closed.is_empty() {
                    self.forget_closed(port);
                    let i = self.closed_next % self.closed.len();
                    self.closed[i] = Some(Closed {
                        port,
                        first_syn: None,
                    });
                    self.closed_next = i + 1;
                }
                true
            }
            None => false,
        }
    }

    /// The listener on `port`.
    pub fn get(&self, port: u16) -> Option<&Listener> {
        self.entries.iter().flatten().find(|l| l.port == port)
    }

    /// The listener on `port`, mutable.
    pub fn get_mut(&mut self, port: u16) -> Option<&mut Listener> {
        self.entries.iter_mut().flatten().find(|l| l.port == port)
    }

    /// Takes a backlog slot on `port`; false if there is no listener or its backlog is full.
    pub fn take_slot(&mut self, port: u16) -> bool {
        match self.get_mut(port) {
            Some(l) if l.pending < l.backlog => {
                l.pending += 1;
                true
            }
            _ => false,
        }
    }

    /// Gives a backlog slot back (accepted, rejected or failed).
    pub fn release_slot(&mut self, port: u16) {
        if let Some(l) = self.get_mut(port) {
            l.pending = l.pending.saturating_sub(1);
        }
    }
}

/// Picks local ports for active opens from an ephemeral range, round-robin from a start
/// chosen by a secret (RFC 6056 section 3.3.2's spirit: a restarted host does not reuse the
/// same ports in the same order, and an off-path attacker cannot guess the next one).
#[derive(Clone, Debug)]
pub struct PortAllocator {
    min: u16,
    max: u16,
    next: u16,
}

impl PortAllocator {
    /// Ports in `min..=max`.
    pub fn new(min: u16, max: u16) -> PortAllocator {
        PortAllocator {
            min,
            max,
            next: min,
        }
    }

    /// Ports in `min..=max`, the search starting at a point derived from `seed`.
    pub fn with_seed(min: u16, max: u16, seed: u64) -> PortAllocator {
        let span = u64::from(max.saturating_sub(min)) + 1;
        let offset = (seed % span) as u16;
        PortAllocator {
            min,
            max,
            next: min.saturating_add(offset).min(max),
        }
    }

    /// The first port from the cursor on that `usable` accepts (it checks the tuple is
    /// free and any steering constraint). At most one pass over the range.
    pub fn choose(&mut self, mut usable: impl FnMut(u16) -> bool) -> Option<u16> {
        let span = u32::from(self.max - self.min) + 1;
        for _ in 0..span {
            let p = self.next;
            self.next = if p >= self.max { self.min } else { p + 1 };
            if usable(p) {
                return Some(p);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple(port: u16) -> FourTuple {
        FourTuple {
            local_ip: [10, 0, 0, 1],
            local_port: port,
            remote_ip: [10, 0, 0, 2],
            remote_port: 9,
        }
    }

    #[test]
    fn slab_insert_lookup_remove() {
        let mut t: ConnTable<&str> = ConnTable::new(2, [1; 16]);
        let a = t.insert(tuple(1), "a").unwrap();
        let b = t.insert(tuple(2), "b").unwrap();
        assert_eq!(t.insert(tuple(3), "c"), Err(TableFull));
        assert_eq!(t.lookup(&tuple(1)), Some(a));
        assert_eq!(t.get(b), Some(&"b"));
        assert_eq!(t.remove(a, &tuple(1)), Some("a"));
        assert_eq!(t.get(a), None);
        assert_eq!(t.lookup(&tuple(1)), None);
        let c = t.insert(tuple(3), "c").unwrap();
        assert_ne!(a, c, "reused slot gets a new generation");
        assert_eq!(t.get(a), None, "stale id does not reach the new connection");
        assert_eq!(t.get_mut(c), Some(&mut "c"));
        assert_eq!(t.id_at_slot(slot_of(c)), Some(c));
        assert_eq!(slot_of(c), slot_of(a), "the freed slot was reused");
        assert_eq!(t.id_at_slot(7), None);
        assert_eq!(t.capacity(), 2);
        assert_eq!(t.len(), 2);
        assert!(t.is_full());
    }

    #[test]
    fn lookup_follows_removal_and_reuse() {
        let mut t: ConnTable<u8> = ConnTable::new(4, [3; 16]);
        let a = t.insert(tuple(1), 1).unwrap();
        let b = t.insert(tuple(2), 2).unwrap();
        for _ in 0..3 {
            assert_eq!(t.lookup(&tuple(1)), Some(a));
        }
        assert_eq!(t.lookup(&tuple(2)), Some(b));
        assert_eq!(t.lookup(&tuple(1)), Some(a));
        t.remove(a, &tuple(1));
        assert_eq!(t.lookup(&tuple(1)), None, "not remembered past removal");
        let c = t.insert(tuple(1), 3).unwrap();
        assert_eq!(
            t.lookup(&tuple(1)),
            Some(c),
            "the new connection of the tuple"
        );
        assert_eq!(t.lookup(&tuple(9)), None);
        assert_eq!(t.lookup(&tuple(1)), Some(c));
    }

    /// The wire form of `tuple(port)`: a segment from 10.0.0.2:9 to 10.0.0.1:`port`.
    fn wire(port: u16) -> WireTuple {
        let mut seg = [0u8; 20];
        seg[..2].copy_from_slice(&9u16.to_be_bytes());
        seg[2..4].copy_from_slice(&port.to_be_bytes());
        WireTuple::new([10, 0, 0, 2].into(), [10, 0, 0, 1].into(), &seg).unwrap()
    }

    #[test]
    fn lookup_by_the_wire_form_answers_as_lookup_through_removal_and_reuse() {
        let mut t: ConnTable<u8> = ConnTable::new(4, [3; 16]);
        let a = t.insert(tuple(1), 1).unwrap();
        let b = t.insert(tuple(2), 2).unwrap();
        for _ in 0..3 {
            assert_eq!(t.lookup_wire(wire(1), &tuple(1)), Some(a));
        }
        assert_eq!(t.lookup_wire(wire(2), &tuple(2)), Some(b));
        assert_eq!(t.lookup_wire(wire(1), &tuple(1)), Some(a));
        t.remove(a, &tuple(1));
        assert_eq!(
            t.lookup_wire(wire(1), &tuple(1)),
            None,
            "forgotten on removal"
        );
        let c = t.insert(tuple(1), 3).unwrap();
        assert_eq!(
            t.lookup_wire(wire(1), &tuple(1)),
            Some(c),
            "the tuple's new connection"
        );
        assert_eq!(t.lookup_wire(wire(9), &tuple(9)), None);
        assert_eq!(t.lookup_wire(wire(1), &tuple(1)), Some(c));
        // Another peer address or port is another tuple.
        let mut seg = [0u8; 4];
        seg[..2].copy_from_slice(&9u16.to_be_bytes());
        seg[2..].copy_from_slice(&1u16.to_be_bytes());
        let other = WireTuple::new([10, 0, 0, 3].into(), [10, 0, 0, 1].into(), &seg).unwrap();
        assert_ne!(other, wire(1));
        assert_eq!(
            WireTuple::new([10, 0, 0, 2].into(), [10, 0, 0, 1].into(), &seg[..3]),
            None
        );
    }

    #[test]
    fn duplicate_tuple_refused() {
        let mut t: ConnTable<u8> = ConnTable::new(4, [0; 16]);
        t.insert(tuple(1), 1).unwrap();
        assert_eq!(t.insert(tuple(1), 2), Err(TableFull));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn round_robin_visits_everyone() {
        let mut t: ConnTable<u16> = ConnTable::new(4, [0; 16]);
        let ids: Vec<ConnId> = (1..=3).map(|p| t.insert(tuple(p), p).unwrap()).collect();
        let seen: Vec<ConnId> = (0..3).map(|_| t.next_round_robin().unwrap()).collect();
        for id in &ids {
            assert!(seen.contains(id));
        }
        t.remove(ids[0], &tuple(1));
        let next: Vec<ConnId> = (0..4).map(|_| t.next_round_robin().unwrap()).collect();
        assert!(!next.contains(&ids[0]));
        assert!(next.contains(&ids[1]) && next.contains(&ids[2]));
    }

    #[test]
    fn listeners_and_backlog() {
        let mut l = Listeners::new(1);
        assert_eq!(l.listen(0, 1), Err(ListenError::Invalid));
        l.listen(80, 1).unwrap();
        assert_eq!(l.listen(80, 1), Err(ListenError::InUse));
        assert_eq!(l.listen(81, 1), Err(ListenError::TableFull));
        assert!(l.take_slot(80));
        assert!(!l.take_slot(80), "backlog of one");
        l.release_slot(80);
        assert!(l.take_slot(80));
        assert!(!l.take_slot(81));
        assert!(l.unlisten(80));
        assert!(l.get(80).is_none());
    }

    #[test]
    fn a_syn_for_a_port_just_closed_is_dropped_for_the_grace_period() {
        let mut l = Listeners::new(2);
        let t0 = Instant(1_000_000_000);
        let grace = Duration::from_millis(500);
        assert!(l.refuse_syn(80, t0, grace), "never listened: refused");
        l.listen(80, 4).unwrap();
        l.unlisten(80);
        assert!(!l.refuse_syn(80, t0, grace), "just closed: dropped");
        assert!(!l.refuse_syn(80, t0 + Duration::from_millis(499), grace));
        assert!(
            l.refuse_syn(80, t0 + Duration::from_millis(500), grace),
            "grace over"
        );
        assert!(
            l.refuse_syn(80, t0 + Duration::from_millis(501), grace),
            "and forgotten"
        );
        // Listening again clears it; the table of closed ports is bounded.
        l.listen(80, 4).unwrap();
        l.unlisten(80);
        l.listen(80, 4).unwrap();
        assert!(l.get(80).is_some());
        for p in 1..=5 {
            l.listen(1000 + p, 1).unwrap_or(());
            l.unlisten(1000 + p);
        }
        assert!(
            l.refuse_syn(1001, t0, grace),
            "the oldest closed port was replaced"
        );
        assert!(!l.refuse_syn(1005, t0, grace));
    }

    #[test]
    fn ports_round_robin_with_filter() {
        let s = PortAllocator::with_seed(100, 103, 6);
        assert_eq!(s.next, 102, "the start follows the seed");
        let mut p = PortAllocator::new(100, 103);
        assert_eq!(p.choose(|_| true), Some(100));
        assert_eq!(p.choose(|x| x % 2 == 1), Some(101));
        assert_eq!(p.choose(|x| x == 100), Some(100), "wraps around");
        assert_eq!(p.choose(|_| false), None);
    }
}
