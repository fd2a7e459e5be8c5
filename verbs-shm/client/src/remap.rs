//! Remap-in-place of ordinary memory (`reg_user_mr`, docs/APPS.md "Memory"): the pages
//! enclosing a buffer are copied into a sealed memfd that is then mapped
//! `MAP_FIXED | MAP_SHARED` over the same addresses, so the buffer keeps its address
//! and contents and the daemon can map the memfd too.
//!
//! A memfd serves a window of addresses: byte `v` of the process is byte `v - base` of
//! the file. The file starts [`SLACK_BYTES`] below the first buffer's pages (a hole
//! there costs nothing) and grows on demand (it is sealed against shrinking only), so a
//! later buffer whose pages overlap the live ones, above or a little below them, extends
//! the same memfd: its missing pages are copied into the file and mapped in place, and
//! every page keeps one home shared by all the registrations that cover it. Only a
//! buffer that would join two live memfds, or reach further below one than its slack,
//! is refused.

use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard};

use rustix::fs::{MemfdFlags, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};

use crate::{Error, Result};

/// Name of the memfds this library makes (`/memfd:<name>` in `/proc/self/maps`).
const MEMFD_NAME: &str = "iwarp-user-mr";

/// Most live remapped ranges in the process.
const MAX_REMAPS: usize = 1 << 16;

/// Addresses a memfd's window reaches below its first buffer's pages, for later
/// buffers that start a little lower (malloc's free lists, deeper stack frames).
/// Counted in every import of the memfd (`control.max_arena_mb`), never allocated.
pub(crate) const SLACK_BYTES: usize = 256 << 10;

/// A memfd this library maps over application pages, and that registrations still use.
struct Remap {
    /// Address of the file's byte 0 (page aligned; need not be mapped).
    base: usize,
    /// The application's pages mapped from the file: `lo..hi` (page aligned).
    lo: usize,
    hi: usize,
    /// Bytes of the file (`>= hi - base`).
    file_len: usize,
    fd: Arc<OwnedFd>,
    users: usize,
}

/// Every live remapped window of the process (their `lo..hi` do not overlap).
static REMAPS: Mutex<Vec<Remap>> = Mutex::new(Vec::new());

fn remaps() -> MutexGuard<'static, Vec<Remap>> {
    REMAPS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The pages of a buffer after remapping: they are now (part of) the memfd `fd`, whose
/// byte 0 is the address `start`. While it lives, a later registration over the same or
/// adjoining pages extends the memfd; when the last is dropped, the pages may be
/// remapped afresh.
#[derive(Debug)]
pub(crate) struct Remapped {
    /// The memfd (sealed against shrinking).
    pub(crate) fd: Arc<OwnedFd>,
    /// Address of the memfd's byte 0 (bytes below the buffer's pages may be other
    /// memory of the process: only `offset..offset + buffer length` is the buffer).
    pub(crate) start: NonNull<u8>,
    /// Bytes of the memfd to import: through the buffer's last page (a multiple of the
    /// page size).
    pub(crate) len: usize,
    /// Offset of the buffer's first byte in the memfd.
    pub(crate) offset: usize,
}

// SAFETY: `start` is only an address (never dereferenced through this value).
unsafe impl Send for Remapped {}
// SAFETY: as for `Send`.
unsafe impl Sync for Remapped {}

impl Drop for Remapped {
    fn drop(&mut self) {
        let mut r = remaps();
        if let Some(i) = r.iter().position(|m| Arc::ptr_eq(&m.fd, &self.fd)) {
            r[i].users -= 1;
            if r[i].users == 0 {
                r.swap_remove(i);
            }
        }
    }
}

fn not_remappable(why: String) -> Error {
    Error::invalid(format!(
        "{why}: reg_user_mr remaps only private read-write memory (malloc, Vec, anonymous \
         or private file mmap, stack, a program's data and bss); allocate registered memory \
         with alloc_arena instead"
    ))
}

/// `statfs` magic of hugetlbfs (linux/magic.h).
const HUGETLBFS_MAGIC: i64 = 0x9584_58f6;

/// A private read-write mapping of file `path` can be remapped: its writes never reach
/// the file, so a private copy at the same addresses is the same memory to the process
/// (a program's `.data` and the page `.bss` starts in, `MAP_PRIVATE` file mappings).
/// Not on hugetlbfs (huge pages cannot be remapped in 4 KiB parts), nor a file that is
/// gone (`/anon_hugepage (deleted)`, the anonymous huge pages, among them).
// `f_type`'s C type differs between architectures (c_long here).
#[allow(clippy::unnecessary_cast)]
fn private_file_remappable(path: &str) -> bool {
    path.starts_with('/')
        && !path.ends_with("(deleted)")
        && rustix::fs::statfs(path).is_ok_and(|st| st.f_type as i64 != HUGETLBFS_MAGIC)
}

/// What a mapping in `/proc/self/maps` is, for remapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MapKind {
    /// Private, anonymous, read-write: can be remapped.
    PrivateAnon,
    /// Private, read-write, of a file (not on hugetlbfs): can be remapped.
    PrivateFile,
    /// One of our memfds no registration uses any more: can be remapped.
    Ours,
    /// Anything else.
    Other,
}

/// One line of `/proc/self/maps`: its range and kind.
fn parse_maps_line(line: &str) -> Option<(usize, usize, MapKind)> {
    let mut f = line.split_whitespace();
    let range = f.next()?;
    let perms = f.next()?.as_bytes();
    let _offset = f.next()?;
    let _dev = f.next()?;
    let inode = f.next()?;
    let path = f.next().unwrap_or("");
    let (a, b) = range.split_once('-')?;
    let start = usize::from_str_radix(a, 16).ok()?;
    let end = usize::from_str_radix(b, 16).ok()?;
    let rw = perms.len() >= 4 && perms[0] == b'r' && perms[1] == b'w';
    let kind = if rw && perms[3] == b'p' && inode == "0" {
        MapKind::PrivateAnon
    } else if rw && perms[3] == b'p' && private_file_remappable(path) {
        MapKind::PrivateFile
    } else if rw && perms[3] == b's' && path.strip_prefix("/memfd:") == Some(MEMFD_NAME) {
        MapKind::Ours
    } else {
        MapKind::Other
    };
    Some((start, end, kind))
}

/// `Ok` if `[start, end)` is covered by mappings that can be remapped (the caller has
/// checked that no live registration uses them).
fn check_remappable(start: usize, end: usize) -> Result<()> {
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let mut covered = start;
    for (a, b, kind) in maps.lines().filter_map(parse_maps_line) {
        if b <= covered || a >= end {
            continue;
        }
        if a > covered {
            break;
        }
        if kind == MapKind::Other {
            return Err(not_remappable(format!(
                "the pages at {a:#x}..{b:#x} are shared, huge pages or not read-write"
            )));
        }
        covered = b;
        if covered >= end {
            return Ok(());
        }
    }
    Err(not_remappable(format!(
        "the buffer's pages {start:#x}..{end:#x} are not all mapped"
    )))
}

/// Copies the pages `a..b` into `fd` at `a - base` and maps that part of the file over
/// them, in place.
///
/// # Safety
///
/// `a..b` are page-aligned pages of this process, remappable (checked with
/// [`check_remappable`]) and used by no live registration; `fd` is at least `b - base`
/// bytes long; no other thread writes the pages during the call.
unsafe fn fill_and_map(fd: &OwnedFd, base: usize, a: usize, b: usize) -> Result<()> {
    let mut done = 0;
    while a + done < b {
        // SAFETY: `a..b` is mapped readable (the caller's contract); only read, by the
        // kernel, and nothing in this process writes it meanwhile.
        let src = unsafe { std::slice::from_raw_parts((a + done) as *const u8, b - a - done) };
        let n = rustix::io::pwrite(fd, src, (a + done - base) as u64)?;
        if n == 0 {
            return Err(Error::protocol("pwrite into the memfd wrote nothing"));
        }
        done += n;
    }
    // SAFETY: `a..b` are page-aligned pages of this process that no live registration
    // uses (the caller's contract). MAP_FIXED replaces them atomically with the part of
    // the memfd that now holds a copy of their contents, at the same addresses and with
    // the same rights, so every pointer into them stays valid and sees the same bytes.
    let placed = unsafe {
        rustix::mm::mmap(
            a as *mut _,
            b - a,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED | MapFlags::FIXED,
            fd.as_fd(),
            (a - base) as u64,
        )
    }?;
    if placed as usize != a {
        return Err(Error::protocol("MAP_FIXED placed the mapping elsewhere"));
    }
    Ok(())
}

/// Remaps the pages enclosing `ptr..ptr+len` onto a sealed memfd, in place: the memfd
/// of the live registrations whose pages they overlap (extended by the pages it lacks),
/// or a new one.
///
/// # Safety
///
/// `ptr..ptr+len` must be memory of this process. No other thread may write the
/// enclosing pages during the call (a write between the copy and the remap would be
/// lost). Everything else in those pages moves along (same contents, now shared with
/// whoever maps the memfd).
pub(crate) unsafe fn remap_in_place(ptr: *mut u8, len: usize) -> Result<Remapped> {
    if ptr.is_null() || len == 0 {
        return Err(Error::invalid("reg_user_mr of a null pointer or 0 bytes"));
    }
    let page = rustix::param::page_size();
    let addr = ptr as usize;
    let start = addr & !(page - 1);
    let end = addr
        .checked_add(len)
        .and_then(|e| e.checked_next_multiple_of(page))
        .ok_or_else(|| Error::invalid("buffer wraps the address space"))?;
    if start == 0 {
        return Err(Error::invalid("reg_user_mr in the first page of memory"));
    }
    // Held to the end: no other thread remaps (or releases) pages meanwhile.
    let mut live = remaps();
    let mut hit = live
        .iter()
        .enumerate()
        .filter(|(_, m)| m.lo < end && start < m.hi)
        .map(|(i, _)| i);
    let (first, second) = (hit.next(), hit.next());
    let i = match (first, second) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid(
                "the buffer's pages join two separately registered reg_user_mr buffers: \
                 register one buffer covering both first, or use alloc_arena",
            ))
        }
        (Some(i), None) => i,
        (None, _) => {
            if live.len() >= MAX_REMAPS {
                return Err(Error::invalid(
                    "too many reg_user_mr buffers: use alloc_arena",
                ));
            }
            check_remappable(start, end)?;
            let base = start.saturating_sub(SLACK_BYTES).max(page);
            let fd = rustix::fs::memfd_create(
                MEMFD_NAME,
                MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
            )?;
            rustix::fs::ftruncate(&fd, (end - base) as u64)?;
            // Only shrinking is sealed: a later registration may grow the file.
            rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK)?;
            // SAFETY: checked remappable above and used by no live registration (none
            // overlaps); the file is `end - base` long; the caller's contract.
            unsafe { fill_and_map(&fd, base, start, end) }?;
            live.push(Remap {
                base,
                lo: start,
                hi: end,
                file_len: end - base,
                fd: Arc::new(fd),
                users: 0,
            });
            live.len() - 1
        }
    };
    let m = &mut live[i];
    if start < m.base {
        return Err(Error::invalid(format!(
            "the buffer's pages start {:#x} bytes below an overlapping reg_user_mr \
             buffer's, more than the {} KiB its memfd reaches: register the lower buffer \
             first, or use alloc_arena",
            m.lo - start,
            (m.lo - m.base) >> 10
        )));
    }
    // The pages the window lacks, below and above it; checked before any change.
    let below = (start < m.lo).then_some((start, m.lo));
    let above = (end > m.hi).then_some((m.hi, end));
    for &(a, b) in below.iter().chain(above.iter()) {
        check_remappable(a, b)?;
    }
    if end - m.base > m.file_len {
        rustix::fs::ftruncate(&*m.fd, (end - m.base) as u64)?;
        m.file_len = end - m.base;
    }
    if let Some((a, b)) = below {
        // SAFETY: checked remappable, outside every live window (only this one
        // overlaps the buffer, and not here); the file covers it; the caller's contract.
        unsafe { fill_and_map(&m.fd, m.base, a, b) }?;
        m.lo = a;
    }
    if let Some((a, b)) = above {
        // SAFETY: as for `below`.
        unsafe { fill_and_map(&m.fd, m.base, a, b) }?;
        m.hi = b;
    }
    m.users += 1;
    Ok(Remapped {
        fd: m.fd.clone(),
        start: NonNull::new(m.base as *mut u8).ok_or_else(|| Error::invalid("null page"))?,
        len: end - m.base,
        offset: addr - m.base,
    })
}

/// Serializes the tests that register malloc'd buffers: two live registrations whose
/// pages overlap partially may be refused, and malloc may place two tests' buffers so.
#[cfg(test)]
pub(crate) static TEST_LOCK: Mutex<()> = Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: usize = 4096;

    /// What the daemon sees: `r`'s memfd mapped afresh. Checks that its bytes at the
    /// buffer's offset are `buf`'s, then that writes either way are seen the other way.
    fn assert_shared(r: &Remapped, buf: *mut u8, n: usize, seed: u8) {
        assert_eq!(r.start.as_ptr() as usize + r.offset, buf as usize);
        assert!(r.len.is_multiple_of(PAGE) && r.offset + n <= r.len);
        let other = iwarp_shm_mem::SharedMapping::from_fd(
            r.fd.as_fd().try_clone_to_owned().unwrap(),
            r.len,
        )
        .unwrap();
        // SAFETY: `buf..buf+n` is the caller's live buffer, `other` maps `r.len` bytes
        // and `r.offset + n <= r.len`; single-threaded.
        unsafe {
            let theirs = other.as_ptr().add(r.offset);
            for k in 0..n {
                assert_eq!(*buf.add(k), *theirs.add(k), "byte {k} differs");
            }
            for k in 0..n {
                *buf.add(k) = (k as u8).wrapping_mul(31).wrapping_add(seed);
            }
            for k in 0..n {
                assert_eq!(
                    *theirs.add(k),
                    (k as u8).wrapping_mul(31).wrapping_add(seed)
                );
                *theirs.add(k) = !*theirs.add(k);
            }
            for k in 0..n {
                assert_eq!(*buf.add(k), !(k as u8).wrapping_mul(31).wrapping_add(seed));
            }
        }
    }

    fn pattern(v: &mut [u8], seed: u8) {
        for (i, b) in v.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(7).wrapping_add(seed);
        }
    }

    /// A fresh private anonymous mapping of `pages` pages.
    fn anon(pages: usize) -> &'static mut [u8] {
        // SAFETY: a fresh private mapping at a kernel-chosen address, never unmapped
        // (leaked for the test), aliasing nothing.
        unsafe {
            let p = rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                pages * PAGE,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )
            .unwrap();
            std::slice::from_raw_parts_mut(p.cast::<u8>(), pages * PAGE)
        }
    }

    #[test]
    fn malloced_vec_keeps_address_and_contents_and_is_shared() {
        let _serial = TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let n = 3 * 4096 + 123;
        let mut v: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
        let before = v.clone();
        let ptr = v.as_mut_ptr();
        // SAFETY: our own Vec; no other thread touches it.
        let r = unsafe { remap_in_place(ptr, n) }.unwrap();
        assert_eq!(v.as_ptr(), ptr);
        assert_eq!(v, before);
        assert_shared(&r, ptr, n, 1);
        // Sealed: the memfd cannot shrink under the daemon.
        assert!(rustix::fs::ftruncate(&*r.fd, 0).is_err());
        // A second registration inside the same pages reuses the memfd.
        // SAFETY: as above.
        let again = unsafe { remap_in_place(ptr.wrapping_add(10), 100) }.unwrap();
        assert!(Arc::ptr_eq(&again.fd, &r.fd));
        assert_eq!(again.offset, r.offset + 10);
        // Once unused, the pages (now our stale memfd) may be remapped afresh.
        let kept = v.clone();
        drop((r, again));
        // SAFETY: as above.
        let fresh = unsafe { remap_in_place(ptr, n) }.unwrap();
        assert_eq!(v, kept);
        assert_shared(&fresh, ptr, n, 2);
        drop(fresh);
        v.push(1); // the Vec stays usable (may reallocate elsewhere)
    }

    #[test]
    fn same_range_twice_and_overlapping_ranges_share_one_memfd() {
        let _serial = TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let m = anon(16);
        pattern(m, 3);
        let before = m.to_vec();
        let p = m.as_mut_ptr();
        // Not page aligned, pages 4..6.
        // SAFETY: our own mapping; single-threaded (for every call below).
        let a = unsafe { remap_in_place(p.wrapping_add(4 * PAGE + 100), 2 * PAGE - 200) }.unwrap();
        // The same range twice.
        // SAFETY: as above.
        let a2 = unsafe { remap_in_place(p.wrapping_add(4 * PAGE + 100), 2 * PAGE - 200) }.unwrap();
        assert!(Arc::ptr_eq(&a.fd, &a2.fd));
        assert_eq!((a.offset, a.len), (a2.offset, a2.len));
        // Overlapping above (pages 5..9) and below (pages 2..5): the same memfd, grown.
        // SAFETY: as above.
        let up = unsafe { remap_in_place(p.wrapping_add(5 * PAGE + 7), 4 * PAGE - 7) }.unwrap();
        // SAFETY: as above.
        let down = unsafe { remap_in_place(p.wrapping_add(2 * PAGE + 1), 3 * PAGE) }.unwrap();
        assert!(Arc::ptr_eq(&a.fd, &up.fd) && Arc::ptr_eq(&a.fd, &down.fd));
        assert!(up.len > a.len);
        // Every byte of the mapping is as it was: inside, beside and between buffers.
        assert_eq!(&m[..], &before[..]);
        // One covering all of them, and more on both sides.
        // SAFETY: as above.
        let all = unsafe { remap_in_place(p.wrapping_add(PAGE - 1), 12 * PAGE) }.unwrap();
        assert!(Arc::ptr_eq(&a.fd, &all.fd));
        assert_eq!(&m[..], &before[..]);
        // Each view is the memory the daemon maps, the earlier (shorter) ones included.
        assert_shared(&a, p.wrapping_add(4 * PAGE + 100), 2 * PAGE - 200, 4);
        assert_shared(&a2, p.wrapping_add(4 * PAGE + 100), 2 * PAGE - 200, 5);
        assert_shared(&up, p.wrapping_add(5 * PAGE + 7), 4 * PAGE - 7, 6);
        assert_shared(&down, p.wrapping_add(2 * PAGE + 1), 3 * PAGE, 7);
        assert_shared(&all, p.wrapping_add(PAGE - 1), 12 * PAGE, 8);
        // Pages outside every registration were never touched.
        assert_eq!(&m[13 * PAGE..], &before[13 * PAGE..]);
        drop((a, a2, up, down, all));
        assert!(remaps()
            .iter()
            .all(|r| r.hi <= p as usize || r.lo >= p as usize + 16 * PAGE));
    }

    #[test]
    fn joining_two_live_memfds_or_reaching_far_below_is_refused_unchanged() {
        let _serial = TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let pages = 2 * SLACK_BYTES / PAGE + 8;
        let m = anon(pages);
        pattern(m, 9);
        let before = m.to_vec();
        let p = m.as_mut_ptr();
        let hi_page = pages - 2;
        // SAFETY: our own mapping; single-threaded.
        let top = unsafe { remap_in_place(p.wrapping_add(hi_page * PAGE), PAGE) }.unwrap();
        // Further below than the slack: refused, nothing changed.
        // SAFETY: as above.
        let e = unsafe { remap_in_place(p, (hi_page + 1) * PAGE) }.unwrap_err();
        assert!(
            e.to_string().contains("register the lower buffer first"),
            "{e}"
        );
        // SAFETY: as above.
        let bottom = unsafe { remap_in_place(p, PAGE) }.unwrap();
        assert!(!Arc::ptr_eq(&top.fd, &bottom.fd));
        // Across both: refused.
        // SAFETY: as above.
        let e = unsafe { remap_in_place(p, pages * PAGE) }.unwrap_err();
        assert!(e.to_string().contains("join two"), "{e}");
        assert_eq!(&m[..], &before[..]);
        assert_shared(&top, p.wrapping_add(hi_page * PAGE), PAGE, 1);
        assert_shared(&bottom, p, PAGE, 2);
    }

    /// A program's initialised data (`.data`: a private mapping of the executable, as
    /// rdma_client's static message buffers) is registered in place, contents kept.
    #[test]
    fn a_programs_static_data_is_registered_in_place() {
        #[repr(align(4096))]
        #[allow(dead_code)] // read through the raw pointer only
        struct Pages([u8; 2 * PAGE]);
        static mut DATA: Pages = Pages([0x5a; 2 * PAGE]);
        let _serial = TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let p = (&raw mut DATA).cast::<u8>();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps
            .lines()
            .find(|l| {
                parse_maps_line(l).is_some_and(|(a, b, _)| a <= p as usize && (p as usize) < b)
            })
            .unwrap();
        assert!(line.contains(" rw-p ") && !line.ends_with(" 0 "), "{line}");
        // SAFETY: only this test (serialised) touches DATA, whose pages hold nothing else.
        let r = unsafe { remap_in_place(p.wrapping_add(100), PAGE) }.unwrap();
        // SAFETY: as above.
        assert!((0..2 * PAGE).all(|k| unsafe { *p.add(k) } == 0x5a));
        assert_shared(&r, p.wrapping_add(100), PAGE, 13);
    }

    #[test]
    fn stack_memory_is_registered_in_place() {
        let _serial = TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut buf = [0u8; 3 * PAGE + 17];
        pattern(&mut buf, 11);
        let before = buf;
        let p = buf.as_mut_ptr();
        // SAFETY: our own stack array, alive to the end of the test; single-threaded.
        let r = unsafe { remap_in_place(p.wrapping_add(3), buf.len() - 3) }.unwrap();
        assert_eq!(buf, before);
        assert_shared(&r, p.wrapping_add(3), before.len() - 3, 12);
        drop(r);
    }

    #[test]
    fn file_mappings_and_null_are_refused() {
        // SAFETY: refused before any access.
        let e = unsafe { remap_in_place(std::ptr::null_mut(), 8) }.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)));
        // A read-only static (file-backed text/rodata of the test binary).
        static RO: [u8; 16] = [1; 16];
        // SAFETY: refused by the maps check before any write.
        let e = unsafe { remap_in_place(RO.as_ptr() as *mut u8, RO.len()) }.unwrap_err();
        assert!(e.to_string().contains("alloc_arena"), "{e}");
    }

    #[test]
    fn maps_lines_parse() {
        use MapKind::*;
        let l = "7f00aa000000-7f00aa021000 rw-p 00000000 00:00 0 ";
        assert_eq!(
            parse_maps_line(l),
            Some((0x7f00aa000000, 0x7f00aa021000, PrivateAnon))
        );
        let l = "55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0    [heap]";
        assert_eq!(parse_maps_line(l).map(|x| x.2), Some(PrivateAnon));
        let l = "7f00aa000000-7f00aa021000 rw-s 00000000 00:01 1234 /memfd:x (deleted)";
        assert_eq!(parse_maps_line(l).map(|x| x.2), Some(Other));
        let l = "7f00aa000000-7f00aa021000 rw-s 00000000 00:01 12 /memfd:iwarp-user-mr (deleted)";
        assert_eq!(parse_maps_line(l).map(|x| x.2), Some(Ours));
        let l = "7f00aa000000-7f00aa021000 r--p 00000000 08:01 99 /usr/lib/libc.so";
        assert_eq!(parse_maps_line(l).map(|x| x.2), Some(Other));
        // A program's writable data: private, of a file that exists.
        let exe = std::env::current_exe().unwrap();
        let l = format!(
            "55d0c0a00000-55d0c0a01000 rw-p 00002000 08:01 99 {}",
            exe.display()
        );
        assert_eq!(parse_maps_line(&l).map(|x| x.2), Some(PrivateFile));
        let l = "7f00aa000000-7f00aa200000 rw-p 00000000 00:0f 4242 /anon_hugepage (deleted)";
        assert_eq!(parse_maps_line(l).map(|x| x.2), Some(Other));
        let l = format!(
            "55d0c0a00000-55d0c0a01000 rw-s 00002000 08:01 99 {}",
            exe.display()
        );
        assert_eq!(parse_maps_line(&l).map(|x| x.2), Some(Other));
        assert_eq!(parse_maps_line("garbage"), None);
    }
}
