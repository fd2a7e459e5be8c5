//! The ARP cache (RFC 826): bounded entries with expiry and retries, and the bounded pool
//! of frames waiting for their next hop to be resolved.

use core::net::Ipv4Addr;

use iwarp_types::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    /// No address yet; `deadline` is the next retry.
    Resolving,
    /// Address valid until `deadline`.
    Resolved,
    /// Address still used while a refresh request is outstanding; `deadline` = retry.
    Refreshing,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    ip: Ipv4Addr,
    mac: [u8; 6],
    state: State,
    deadline: Instant,
    retries: u32,
    used: bool,
}

const FREE: Entry = Entry {
    ip: Ipv4Addr::UNSPECIFIED,
    mac: [0; 6],
    state: State::Free,
    deadline: Instant::ZERO,
    retries: 0,
    used: false,
};

#[derive(Clone, Copy, Debug)]
struct Held {
    hop: Option<Ipv4Addr>,
    len: usize,
    seq: u64,
}

/// What a timer pass asks the interface to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArpAction {
    /// Send an ARP request for this address.
    Request(Ipv4Addr),
    /// Resolution of this address failed after every retry; this many held frames were
    /// dropped.
    Failed(Ipv4Addr, usize),
}

/// Bounded ARP cache plus the frames held for unresolved next hops.
#[derive(Debug)]
pub struct ArpCache {
    entries: Vec<Entry>,
    timeout: Duration,
    retry: Duration,
    retries_max: u32,
    deadline: Option<Instant>,
    held: Vec<Held>,
    held_bytes: Vec<u8>,
    held_slot_len: usize,
    held_per_hop: usize,
    held_count: usize,
    held_seq: u64,
}

impl ArpCache {
    /// A cache of `entries` entries; `pending` held frames of up to `frame_len` bytes,
    /// at most `per_hop` of them per next hop.
    pub fn new(
        entries: usize,
        timeout: Duration,
        retry: Duration,
        retries_max: u32,
        pending: usize,
        per_hop: usize,
        frame_len: usize,
    ) -> ArpCache {
        ArpCache {
            entries: vec![FREE; entries],
            timeout,
            retry,
            retries_max,
            deadline: None,
            held: vec![
                Held {
                    hop: None,
                    len: 0,
                    seq: 0
                };
                pending
            ],
            held_bytes: vec![0; pending * frame_len],
            held_slot_len: frame_len,
            held_per_hop: per_hop,
            held_count: 0,
            held_seq: 0,
        }
    }

    fn find(&self, ip: Ipv4Addr) -> Option<usize> {
        self.entries
            .iter()
            .position(|e| e.state != State::Free && e.ip == ip)
    }

    /// The address of `ip` if known (`hint`: the slot where it was last found, checked
    /// first so the fast path is O(1)). Returns the MAC and its slot.
    pub fn lookup(&mut self, ip: Ipv4Addr, hint: usize) -> Option<([u8; 6], usize)> {
        let slot = match self.entries.get(hint) {
            Some(e) if e.state != State::Free && e.ip == ip => hint,
            _ => self.find(ip)?,
        };
        let e = &mut self.entries[slot];
        match e.state {
            State::Resolved | State::Refreshing => {
                // Written only when it changes: on every segment sent, the store followed
                // by the MAC's load (which shares its 8 bytes) stalled store-to-load
                // forwarding (2.8 % of the engine pair at MTU 1500, most of it there).
                let mac = e.mac;
                if !e.used {
                    e.used = true;
                }
                Some((mac, slot))
            }
            State::Resolving | State::Free => None,
        }
    }

    /// Starts resolving `ip` unless an entry exists. Returns true if a request must be sent
    /// now. If the cache is full and no entry can be evicted, nothing happens (the caller's
    /// frame is dropped and counted).
    pub fn start_resolve(&mut self, now: Instant, ip: Ipv4Addr) -> bool {
        if self.find(ip).is_some() {
            return false;
        }
        let Some(slot) = self.victim() else {
            return false;
        };
        self.entries[slot] = Entry {
            ip,
            mac: [0; 6],
            state: State::Resolving,
            deadline: now + self.retry,
            retries: 1,
            used: true,
        };
        self.recompute_deadline();
        true
    }

    /// A free slot, else the resolved entry that expires first and holds no frames.
    fn victim(&self) -> Option<usize> {
        if let Some(i) = self.entries.iter().position(|e| e.state == State::Free) {
            return Some(i);
        }
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e.state, State::Resolved | State::Refreshing))
            .min_by_key(|(_, e)| e.deadline)
            .map(|(i, _)| i)
    }

    /// Learns `ip` is at `mac` (a reply, or a request naming us). `create`: add an entry if
    /// none exists (RFC 826: only when the packet was for us).
    pub fn learn(&mut self, now: Instant, ip: Ipv4Addr, mac: [u8; 6], create: bool) {
        let slot = match self.find(ip) {
            Some(s) => s,
            None if create => match self.victim() {
                Some(s) => s,
                None => return,
            },
            None => return,
        };
        let used = self.entries[slot].used && self.entries[slot].ip == ip;
        self.entries[slot] = Entry {
            ip,
            mac,
            state: State::Resolved,
            deadline: now + self.timeout,
            retries: 0,
            used,
        };
        self.recompute_deadline();
    }

    /// True if slot `hint` holds `ip`, resolved and not being re-confirmed. O(1) and
    /// without side effects (unlike [`ArpCache::lookup`], which marks the entry used):
    /// the per-segment check before [`ArpCache::glean`]. A stale hint says false;
    /// `glean` then finds the entry.
    pub fn resolved_at(&self, ip: Ipv4Addr, hint: usize) -> bool {
        self.entries
            .get(hint)
            .is_some_and(|e| e.ip == ip && e.state == State::Resolved)
    }

    /// Learns `ip`'s address from a frame it sent us (a SYN to a listener, a segment of
    /// a connection) while `ip` is not resolved: an entry being resolved is resolved at
    /// once (its ARP reply may have been lost: a NIC's RSS sends ARP to one queue, TCP to
    /// another), an absent one is created if `create`. An entry being re-confirmed
    /// (refreshed at expiry, or suspected after a retransmission timeout) is confirmed
    /// by a frame from the address it holds, as Linux confirms a neighbour on TCP
    /// progress: its lost replies no longer free an entry its peer keeps talking
    /// through. A resolved entry's address is never changed this way, only by ARP, so a
    /// forged segment cannot redirect a known peer. True if the entry became resolved.
    /// Scans the cache: only for addresses not resolved.
    pub fn glean(&mut self, now: Instant, ip: Ipv4Addr, mac: [u8; 6], create: bool) -> bool {
        match self.find(ip) {
            Some(slot) if self.entries[slot].state == State::Resolved => false,
            Some(slot) if self.entries[slot].state == State::Refreshing => {
                if self.entries[slot].mac != mac {
                    return false;
                }
                self.learn(now, ip, mac, false);
                true
            }
            None if !create => false,
            _ => {
                if mac[0] & 1 != 0 || mac == [0; 6] {
                    return false;
                }
                self.learn(now, ip, mac, true);
                self.find(ip).is_some()
            }
        }
    }

    /// The upper layer saw no progress through `ip` (a TCP retransmission timeout): the
    /// entry may be stale or forged. A resolved entry is re-confirmed — it keeps being used
    /// while a request is outstanding, like Linux's NUD probe — and `true` says to send
    /// that request now. Entries already being resolved or refreshed are left alone.
    pub fn suspect(&mut self, now: Instant, ip: Ipv4Addr) -> bool {
        let Some(slot) = self.find(ip) else {
            return false;
        };
        let e = &mut self.entries[slot];
        if e.state != State::Resolved {
            return false;
        }
        e.state = State::Refreshing;
        e.retries = 1;
        e.deadline = now + self.retry;
        self.recompute_deadline();
        true
    }

    /// Earliest entry deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    fn recompute_deadline(&mut self) {
        self.deadline = self
            .entries
            .iter()
            .filter(|e| e.state != State::Free)
            .map(|e| e.deadline)
            .min();
    }

    /// Expires entries and schedules retries; `act` is told what to send or what failed.
    pub fn handle_timeout(&mut self, now: Instant, mut act: impl FnMut(ArpAction)) {
        match self.deadline {
            Some(d) if d <= now => {}
            _ => return,
        }
        for e in self.entries.iter_mut() {
            if e.state == State::Free || e.deadline > now {
                continue;
            }
            match e.state {
                State::Resolved if !e.used => *e = FREE,
                State::Resolved => {
                    e.state = State::Refreshing;
                    e.retries = 1;
                    e.used = false;
                    e.deadline = now + self.retry;
                    act(ArpAction::Request(e.ip));
                }
                State::Resolving | State::Refreshing if e.retries < self.retries_max => {
                    e.retries += 1;
                    e.deadline = now + self.retry;
                    act(ArpAction::Request(e.ip));
                }
                State::Resolving | State::Refreshing => {
                    let ip = e.ip;
                    *e = FREE;
                    let mut dropped = 0;
                    for h in self.held.iter_mut().filter(|h| h.hop == Some(ip)) {
                        h.hop = None;
                        dropped += 1;
                    }
                    self.held_count -= dropped;
                    act(ArpAction::Failed(ip, dropped));
                }
                State::Free => {}
            }
        }
        self.recompute_deadline();
    }

    /// Frames held for `hop`.
    pub fn held_for(&self, hop: Ipv4Addr) -> usize {
        self.held.iter().filter(|h| h.hop == Some(hop)).count()
    }

    /// Frames held in total.
    pub fn held_total(&self) -> usize {
        self.held_count
    }

    /// True if one more frame can be held for `hop`.
    pub fn can_hold(&self, hop: Ipv4Addr) -> bool {
        self.held_count < self.held.len() && self.held_for(hop) < self.held_per_hop
    }

    /// Holds a whole frame (its destination MAC is filled on release). False: dropped.
    pub fn hold(&mut self, hop: Ipv4Addr, frame: &[u8]) -> bool {
        if !self.can_hold(hop) || frame.len() > self.held_slot_len {
            return false;
        }
        let Some(i) = self.held.iter().position(|h| h.hop.is_none()) else {
            return false;
        };
        let start = i * self.held_slot_len;
        self.held_bytes[start..start + frame.len()].copy_from_slice(frame);
        self.held_seq = self.held_seq.wrapping_add(1);
        self.held[i] = Held {
            hop: Some(hop),
            len: frame.len(),
            seq: self.held_seq,
        };
        self.held_count += 1;
        true
    }

    /// True while frames wait for a resolution (or for release after one).
    #[inline]
    pub fn holds_frames(&self) -> bool {
        self.held_count != 0
    }

    /// Copies the oldest held frame whose next hop is now resolved into `out`, with its
    /// destination MAC filled. `Some(0)`: a frame was too long for `out` and dropped.
    pub fn release_into(&mut self, out: &mut [u8]) -> Option<usize> {
        if self.held_count == 0 {
            return None;
        }
        let mut best: Option<(usize, [u8; 6])> = None;
        for (i, h) in self.held.iter().enumerate() {
            let Some(hop) = h.hop else { continue };
            let Some(slot) = self.find(hop) else { continue };
            let e = &self.entries[slot];
            if !matches!(e.state, State::Resolved | State::Refreshing) {
                continue;
            }
            if best.is_none_or(|(b, _)| self.held[b].seq > h.seq) {
                best = Some((i, e.mac));
            }
        }
        let (i, mac) = best?;
        let h = self.held[i];
        self.held[i].hop = None;
        self.held_count -= 1;
        let start = i * self.held_slot_len;
        let Some(dst) = out.get_mut(..h.len) else {
            return Some(0);
        };
        dst.copy_from_slice(&self.held_bytes[start..start + h.len]);
        dst[..6].copy_from_slice(&mac);
        Some(h.len)
    }

    /// Drops every frame held for `hop`; returns how many.
    pub fn drop_held(&mut self, hop: Ipv4Addr) -> usize {
        let mut n = 0;
        for h in self.held.iter_mut().filter(|h| h.hop == Some(hop)) {
            h.hop = None;
            n += 1;
        }
        self.held_count -= n;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn cache() -> ArpCache {
        ArpCache::new(
            2,
            Duration::from_secs(60),
            Duration::from_secs(1),
            3,
            3,
            2,
            64,
        )
    }

    #[test]
    fn resolve_hold_release() {
        let mut c = cache();
        let t0 = Instant::ZERO;
        assert_eq!(c.lookup(IP, 0), None);
        assert!(c.start_resolve(t0, IP));
        assert!(
            !c.start_resolve(t0, IP),
            "already resolving: no second request"
        );
        assert!(c.hold(IP, &[0xff; 20]));
        assert!(c.hold(IP, &[0xee; 20]));
        assert!(!c.hold(IP, &[0xdd; 20]), "per-hop bound");
        let mut out = [0u8; 64];
        assert_eq!(c.release_into(&mut out), None, "not resolved yet");
        c.learn(t0, IP, MAC, false);
        assert_eq!(c.lookup(IP, 7), Some((MAC, 0)));
        assert_eq!(c.release_into(&mut out), Some(20));
        assert_eq!(&out[..6], &MAC);
        assert_eq!(out[6], 0xff, "oldest first");
        assert_eq!(c.release_into(&mut out), Some(20));
        assert_eq!(out[6], 0xee);
        assert_eq!(c.release_into(&mut out), None);
        assert_eq!(c.held_total(), 0);
    }

    #[test]
    fn retries_then_failure() {
        let mut c = cache();
        assert!(c.start_resolve(Instant::ZERO, IP));
        assert!(c.hold(IP, &[1; 14]));
        let mut acts = Vec::new();
        let mut t = Instant::ZERO;
        for _ in 0..3 {
            t = c.poll_timeout().unwrap();
            c.handle_timeout(t, |a| acts.push(a));
        }
        assert_eq!(
            acts,
            [
                ArpAction::Request(IP),
                ArpAction::Request(IP),
                ArpAction::Failed(IP, 1)
            ]
        );
        assert_eq!(c.poll_timeout(), None);
        assert_eq!(c.held_total(), 0);
        assert_eq!(c.drop_held(IP), 0);
        assert!(t > Instant::ZERO);
    }

    #[test]
    fn expiry_refreshes_used_entries_and_frees_idle_ones() {
        let mut c = cache();
        let other = Ipv4Addr::new(10, 0, 0, 3);
        c.learn(Instant::ZERO, IP, MAC, true);
        c.learn(Instant::ZERO, other, MAC, true);
        assert!(c.lookup(IP, 0).is_some());
        let mut acts = Vec::new();
        let t = Instant::ZERO + Duration::from_secs(60);
        // `IP` was used since it was learnt (lookup); `other` was only learnt... also used
        // flag false: it is freed.
        c.handle_timeout(t, |a| acts.push(a));
        assert_eq!(acts, [ArpAction::Request(IP)]);
        assert!(c.lookup(IP, 0).is_some(), "still usable while refreshing");
        assert_eq!(c.lookup(other, 1), None);
    }

    #[test]
    fn suspect_reconfirms_a_resolved_entry() {
        let mut c = cache();
        let t = Instant(1_000);
        assert!(!c.suspect(t, IP), "unknown address: nothing to confirm");
        c.learn(t, IP, MAC, true);
        assert!(c.suspect(t, IP), "a resolved entry is re-confirmed");
        assert!(!c.suspect(t, IP), "one request at a time");
        assert_eq!(
            c.lookup(IP, 0).map(|(m, _)| m),
            Some(MAC),
            "still used meanwhile"
        );
        // No answer: retries, then the entry fails like any refresh.
        let mut requests = 0;
        let mut failed = false;
        let mut now = t;
        for _ in 0..32 {
            now = c.poll_timeout().unwrap();
            c.handle_timeout(now, |a| match a {
                ArpAction::Request(_) => requests += 1,
                ArpAction::Failed(..) => failed = true,
            });
            if failed {
                break;
            }
        }
        assert!(failed && requests > 0);
        // An answer restores it.
        c.learn(now, IP, [2; 6], true);
        assert_eq!(c.lookup(IP, 0).map(|(m, _)| m), Some([2; 6]));
    }

    #[test]
    fn a_frame_from_the_same_address_confirms_an_entry_being_reconfirmed() {
        let mut c = cache();
        let t = Instant(1_000);
        c.learn(t, IP, MAC, true);
        assert!(c.resolved_at(IP, 0));
        assert!(c.suspect(t, IP));
        assert!(
            !c.resolved_at(IP, 0),
            "re-confirming: the segment path asks glean"
        );
        assert!(
            !c.glean(t, IP, [2; 6], false),
            "another address never confirms nor changes it"
        );
        assert_eq!(c.lookup(IP, 0).map(|(m, _)| m), Some(MAC));
        assert!(c.glean(t, IP, MAC, false), "its own address confirms it");
        assert!(c.resolved_at(IP, 0));
        // Confirmed: no retry is due before the entry's lifetime.
        let mut acts = Vec::new();
        c.handle_timeout(t + Duration::from_millis(1), |a| acts.push(a));
        assert!(acts.is_empty(), "{acts:?}");
        assert!(c.poll_timeout().unwrap() >= t + c.timeout);
        // The same holds for the refresh at expiry.
        let later = c.poll_timeout().unwrap();
        c.handle_timeout(later, |a| acts.push(a));
        assert_eq!(acts, [ArpAction::Request(IP)]);
        assert!(c.glean(later, IP, MAC, false));
        assert!(c.resolved_at(IP, 0));
    }

    #[test]
    fn full_cache_evicts_resolved_first_expiring() {
        let mut c = cache();
        c.learn(Instant(5), IP, MAC, true);
        c.learn(Instant(9), Ipv4Addr::new(10, 0, 0, 3), MAC, true);
        assert!(c.start_resolve(Instant(10), Ipv4Addr::new(10, 0, 0, 4)));
        assert_eq!(c.lookup(IP, 0), None, "oldest entry evicted");
        // Now one Resolving + one Resolved: a new resolution evicts the resolved one.
        assert!(c.start_resolve(Instant(11), Ipv4Addr::new(10, 0, 0, 5)));
        assert!(
            !c.start_resolve(Instant(12), Ipv4Addr::new(10, 0, 0, 6)),
            "full"
        );
    }

    #[test]
    fn glean_resolves_what_is_not_resolved_and_never_changes_a_resolved_entry() {
        let mut c = cache();
        assert!(!c.glean(Instant::ZERO, IP, MAC, false), "absent, no create");
        assert!(c.start_resolve(Instant::ZERO, IP));
        assert!(!c.resolved_at(IP, 0));
        assert!(
            c.glean(Instant::ZERO, IP, MAC, false),
            "resolving: resolved"
        );
        assert_eq!(c.lookup(IP, 0).map(|(m, _)| m), Some(MAC));
        assert!(c.resolved_at(IP, 0));
        assert!(!c.glean(Instant::ZERO, IP, [2; 6], true), "resolved: kept");
        assert_eq!(c.lookup(IP, 0).map(|(m, _)| m), Some(MAC));
        let other = Ipv4Addr::new(10, 0, 0, 9);
        assert!(
            !c.glean(Instant::ZERO, other, [1; 6], true),
            "a multicast MAC"
        );
        assert!(
            c.glean(Instant::ZERO, other, [2; 6], true),
            "absent, created"
        );
    }

    #[test]
    fn learn_without_create_ignores_unknown() {
        let mut c = cache();
        c.learn(Instant::ZERO, IP, MAC, false);
        assert_eq!(c.lookup(IP, 0), None);
    }
}
