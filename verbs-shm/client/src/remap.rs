//! Remap-in-place of ordinary memory (`reg_user_mr`, docs/APPS.md "Memory"): the pages
//! enclosing a buffer are copied into a sealed memfd that is then mapped
//! `MAP_FIXED | MAP_SHARED` over the same addresses, so the buffer keeps its address
//! and contents and the daemon can map the memfd too.

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

/// A range of pages this library remapped and that registered MRs still use.
struct Remap {
    start: usize,
    len: usize,
    fd: Arc<OwnedFd>,
    users: usize,
}

/// Every live remapped range of the process (a buffer inside one reuses its memfd).
static REMAPS: Mutex<Vec<Remap>> = Mutex::new(Vec::new());

fn remaps() -> MutexGuard<'static, Vec<Remap>> {
    REMAPS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The pages of a buffer after remapping: they are now (part of) the memfd `fd`. While
/// it lives, a later registration inside the same pages reuses the memfd; when the last
/// is dropped, the pages may be remapped afresh.
#[derive(Debug)]
pub(crate) struct Remapped {
    /// The memfd (sealed against shrinking and growing).
    pub(crate) fd: Arc<OwnedFd>,
    /// First byte of the first page of the memfd's mapping.
    pub(crate) start: NonNull<u8>,
    /// Bytes of the memfd's mapping (a multiple of the page size).
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
        let start = self.start.as_ptr() as usize;
        let mut r = remaps();
        if let Some(i) = r.iter().position(|m| m.start == start) {
            r[i].users -= 1;
            if r[i].users == 0 {
                r.swap_remove(i);
            }
        }
    }
}

fn not_remappable(why: String) -> Error {
    Error::invalid(format!(
        "{why}: reg_user_mr remaps only private anonymous read-write memory (malloc, \
         Vec, anonymous mmap); allocate registered memory with alloc_arena instead"
    ))
}

/// What a mapping in `/proc/self/maps` is, for remapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MapKind {
    /// Private, anonymous, read-write: can be remapped.
    PrivateAnon,
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
    } else if rw && perms[3] == b's' && path.strip_prefix("/memfd:") == Some(MEMFD_NAME) {
        MapKind::Ours
    } else {
        MapKind::Other
    };
    Some((start, end, kind))
}

/// `Ok` if `[start, end)` is covered by mappings that can be remapped.
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
                "the pages at {a:#x}..{b:#x} are shared, file-backed or not read-write"
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

/// Remaps the pages enclosing `ptr..ptr+len` onto a new sealed memfd, in place, or
/// reuses the memfd of a live earlier remap that contains them.
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
    let size = end - start;
    // Held to the end: no other thread remaps (or releases) pages meanwhile.
    let mut live = remaps();
    if let Some(m) = live
        .iter_mut()
        .find(|m| m.start <= start && end <= m.start + m.len)
    {
        m.users += 1;
        return Ok(Remapped {
            fd: m.fd.clone(),
            start: NonNull::new(m.start as *mut u8).ok_or_else(|| Error::invalid("null page"))?,
            len: m.len,
            offset: addr - m.start,
        });
    }
    if live
        .iter()
        .any(|m| m.start < end && start < m.start + m.len)
    {
        return Err(Error::invalid(
            "the buffer's pages overlap (without being inside) another buffer registered \
             with reg_user_mr: register one buffer covering both, or use alloc_arena",
        ));
    }
    if live.len() >= MAX_REMAPS {
        return Err(Error::invalid(
            "too many reg_user_mr buffers: use alloc_arena",
        ));
    }
    check_remappable(start, end)?;
    let fd = rustix::fs::memfd_create(MEMFD_NAME, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    rustix::fs::ftruncate(&fd, size as u64)?;
    // SAFETY: a fresh shared mapping of the new memfd at a kernel-chosen address.
    let tmp = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            size,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            &fd,
            0,
        )
    }?;
    // SAFETY: `start..end` is mapped readable (checked above, and the caller's buffer
    // lies in it); `tmp` is `size` fresh writable bytes; the two do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(start as *const u8, tmp.cast::<u8>(), size) };
    // SAFETY: `tmp` is the temporary mapping made above, used by nothing else.
    unsafe { rustix::mm::munmap(tmp, size) }?;
    rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW)?;
    // SAFETY: `start..end` are page-aligned pages of this process that no live
    // registration uses (checked: private anonymous read-write, or a memfd of ours no MR
    // uses any more). MAP_FIXED replaces them atomically with the memfd, which holds a
    // copy of their contents, at the same addresses and with the same rights, so every
    // pointer into them stays valid and sees the same bytes.
    let placed = unsafe {
        rustix::mm::mmap(
            start as *mut _,
            size,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED | MapFlags::FIXED,
            fd.as_fd(),
            0,
        )
    }?;
    if placed as usize != start {
        return Err(Error::protocol("MAP_FIXED placed the mapping elsewhere"));
    }
    let fd = Arc::new(fd);
    live.push(Remap {
        start,
        len: size,
        fd: fd.clone(),
        users: 1,
    });
    Ok(Remapped {
        fd,
        start: NonNull::new(start as *mut u8).ok_or_else(|| Error::invalid("null page"))?,
        len: size,
        offset: addr - start,
    })
}

/// Serializes the tests that register malloc'd buffers: two live registrations whose
/// pages overlap partially are refused, and malloc may place two tests' buffers so.
#[cfg(test)]
pub(crate) static TEST_LOCK: Mutex<()> = Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(r.start.as_ptr() as usize + r.offset, ptr as usize);
        assert!(r.len >= n && r.len % 4096 == 0);
        // The pages are now the memfd: a second mapping of it sees writes through `v`.
        let other = iwarp_shm_mem::SharedMapping::from_fd(
            r.fd.as_fd().try_clone_to_owned().unwrap(),
            r.len,
        )
        .unwrap();
        v[5] = 0xa5;
        v[n - 1] = 0x5a;
        // SAFETY: `other` maps `r.len` bytes; the offsets are inside.
        let seen = unsafe {
            (
                *other.as_ptr().add(r.offset + 5),
                *other.as_ptr().add(r.offset + n - 1),
            )
        };
        assert_eq!(seen, (0xa5, 0x5a));
        // Sealed: the memfd cannot shrink under the daemon.
        assert!(rustix::fs::ftruncate(&r.fd, 0).is_err());
        // A second registration inside the same pages reuses the memfd.
        // SAFETY: as above.
        let again = unsafe { remap_in_place(ptr.add(10), 100) }.unwrap();
        assert!(Arc::ptr_eq(&again.fd, &r.fd));
        assert_eq!(again.offset, r.offset + 10);
        // One straddling the live range is refused with a clear message.
        // SAFETY: as above; refused before any change.
        let e = unsafe { remap_in_place(ptr.sub(r.offset + 1), 2) }.unwrap_err();
        assert!(e.to_string().contains("alloc_arena"), "{e}");
        // Once unused, the pages (now our stale memfd) may be remapped afresh.
        drop((r, again, other));
        // SAFETY: as above.
        let fresh = unsafe { remap_in_place(ptr, n) }.unwrap();
        assert_eq!(fresh.start.as_ptr() as usize + fresh.offset, ptr as usize);
        assert_eq!(v[5], 0xa5);
        drop(fresh);
        v.push(1); // the Vec stays usable (may reallocate elsewhere)
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
        assert_eq!(parse_maps_line("garbage"), None);
    }
}
