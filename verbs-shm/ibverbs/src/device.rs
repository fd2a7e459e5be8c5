//! The device list: one device `iwarp_<daemon>` per running iwarpd, found from its verbs
//! socket `/run/iwarpd/<daemon>.verbs` (`ibv_get_device_list`, `ibv_get_device_name`,
//! `ibv_get_device_guid`, the sysfs helpers).

use std::ffi::{c_char, c_int, CStr};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use iwarp_verbs::Context;

use crate::debug::debug;
use crate::errno::{fail_with, set_errno};
use crate::sys;

/// Environment variable naming the directory of verbs sockets to list (default
/// `/run/iwarpd`). `IWARP_VERBS_SOCKET` (the client library's) lists that socket alone.
pub const SOCKET_DIR_ENV: &str = "IWARP_VERBS_DIR";

/// Most devices this process ever knows (daemons are few; a device stays allocated once
/// listed, as rdma-core's do while the library is loaded).
const MAX_DEVICES: usize = 64;

/// A device: rdma-core's `ibv_device` (first, so a `*mut ibv_device` is a `*mut IwDevice`)
/// and where its daemon listens.
#[repr(C)]
pub(crate) struct IwDevice {
    pub(crate) dev: sys::ibv_device,
    /// The daemon's verbs socket.
    pub(crate) socket: PathBuf,
    /// EUI-64 of port 1's MAC, network order (`ibv_get_device_guid`).
    pub(crate) guid_be: u64,
}

/// Every device listed so far; boxes never move or go away, so pointers handed out stay
/// valid for the life of the process.
#[allow(clippy::vec_box)] // the boxes keep the addresses stable as the Vec grows
static DEVICES: Mutex<Vec<Box<IwDevice>>> = Mutex::new(Vec::new());

/// `iwarp_<daemon>`: the device name of the daemon whose socket is `socket`.
pub fn device_name_for(socket: &Path) -> String {
    let stem = socket
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("iwarp_{stem}")
}

/// The EUI-64 of a MAC (the universal/local bit flipped, `ff:fe` in the middle), as siw and
/// hardware iWARP providers derive their node GUID, as a host-order integer of the
/// network-order bytes.
pub fn guid_from_mac(mac: [u8; 6]) -> u64 {
    let b = [
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ];
    u64::from_be_bytes(b)
}

fn copy_cstr(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len() - 1);
    for (d, b) in dst.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *b as c_char;
    }
    dst[n] = 0;
}

/// The sockets to list: `IWARP_VERBS_SOCKET` alone if set, else every `*.verbs` of the
/// directory, sorted.
fn sockets() -> Vec<PathBuf> {
    if let Some(p) = std::env::var_os(iwarp_verbs::SOCKET_ENV).filter(|p| !p.is_empty()) {
        return vec![PathBuf::from(p)];
    }
    let dir = std::env::var_os(SOCKET_DIR_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(iwarp_verbs::proto::DEFAULT_SOCKET_DIR));
    let mut v: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "verbs"))
            .collect(),
        Err(e) => {
            debug!("no device: cannot read {}: {e}", dir.display());
            Vec::new()
        }
    };
    v.sort();
    v.truncate(MAX_DEVICES);
    v
}

/// The device of `socket` if its daemon answers (its GUID from port 1's MAC), added to
/// the registry on first sight.
#[allow(clippy::vec_box)]
fn probe(socket: &Path, devices: &mut Vec<Box<IwDevice>>) -> Option<*mut sys::ibv_device> {
    let ctx = match Context::open_path(socket) {
        Ok(c) => c,
        Err(e) => {
            debug!("no device for {}: {e}", socket.display());
            return None;
        }
    };
    let guid_be = ctx
        .ports()
        .first()
        .map(|p| guid_from_mac(p.mac))
        .unwrap_or(0);
    drop(ctx);
    if let Some(d) = devices.iter_mut().find(|d| d.socket == socket) {
        d.guid_be = guid_be;
        return Some(&mut d.dev);
    }
    if devices.len() >= MAX_DEVICES {
        debug!(
            "no device for {}: {MAX_DEVICES} devices known already",
            socket.display()
        );
        return None;
    }
    let name = device_name_for(socket);
    let mut dev = sys::ibv_device {
        node_type: sys::IBV_NODE_RNIC,
        transport_type: sys::IBV_TRANSPORT_IWARP,
        ..Default::default()
    };
    copy_cstr(&mut dev.name, &name);
    copy_cstr(&mut dev.dev_name, &format!("uverbs-{name}"));
    // No sysfs directory exists: ibv_read_sysfs_file on them finds nothing.
    copy_cstr(
        &mut dev.dev_path,
        &format!("/sys/class/infiniband_verbs/uverbs-{name}"),
    );
    copy_cstr(
        &mut dev.ibdev_path,
        &format!("/sys/class/infiniband/{name}"),
    );
    devices.push(Box::new(IwDevice {
        dev,
        socket: socket.to_path_buf(),
        guid_be,
    }));
    devices
        .last_mut()
        .map(|d| &mut d.dev as *mut sys::ibv_device)
}

/// `struct ibv_device **ibv_get_device_list(int *num_devices)`: the devices of the
/// daemons that answer now; an empty list (not NULL) when there are none.
#[no_mangle]
pub unsafe extern "C" fn iwarp_ibv_get_device_list(num: *mut c_int) -> *mut *mut sys::ibv_device {
    let found: Vec<*mut sys::ibv_device> = {
        let mut devices = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
        sockets()
            .iter()
            .filter_map(|s| probe(s, &mut devices))
            .collect()
    };
    if found.is_empty() {
        debug!("no iwarpd answers: the device list is empty");
    }
    // SAFETY: calloc of found.len()+1 pointers; freed by ibv_free_device_list (free).
    let list = unsafe { libc::calloc(found.len() + 1, std::mem::size_of::<usize>()) }
        as *mut *mut sys::ibv_device;
    if list.is_null() {
        set_errno(libc::ENOMEM);
        return std::ptr::null_mut();
    }
    for (i, d) in found.iter().enumerate() {
        // SAFETY: i < found.len(), inside the allocation.
        unsafe { *list.add(i) = *d };
    }
    if !num.is_null() {
        // SAFETY: the caller passes a valid int pointer or NULL.
        unsafe { *num = found.len() as c_int };
    }
    list
}

/// `void ibv_free_device_list(struct ibv_device **list)`.
#[no_mangle]
pub unsafe extern "C" fn iwarp_ibv_free_device_list(list: *mut *mut sys::ibv_device) {
    // SAFETY: the list came from ibv_get_device_list (calloc) or is NULL.
    unsafe { libc::free(list.cast()) };
}

/// The `IwDevice` of a device pointer this library handed out, else None.
pub(crate) fn lookup(dev: *mut sys::ibv_device) -> Option<&'static IwDevice> {
    if dev.is_null() {
        return None;
    }
    let devices = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    devices
        .iter()
        .find(|d| std::ptr::eq(&d.dev, dev))
        // SAFETY: boxes in DEVICES are never freed or moved; the reference is 'static.
        .map(|d| unsafe { &*(&**d as *const IwDevice) })
}

/// `const char *ibv_get_device_name(struct ibv_device *device)`.
#[no_mangle]
pub extern "C" fn iwarp_ibv_get_device_name(dev: *mut sys::ibv_device) -> *const c_char {
    match lookup(dev) {
        Some(d) => d.dev.name.as_ptr(),
        None => {
            fail_with(
                "ibv_get_device_name",
                libc::EINVAL,
                "not a device of this library",
            );
            std::ptr::null()
        }
    }
}

/// `__be64 ibv_get_device_guid(struct ibv_device *device)`.
#[no_mangle]
pub extern "C" fn iwarp_ibv_get_device_guid(dev: *mut sys::ibv_device) -> u64 {
    match lookup(dev) {
        // Network order in memory: the integer whose native bytes are the big-endian GUID.
        Some(d) => d.guid_be.to_be(),
        None => {
            fail_with(
                "ibv_get_device_guid",
                libc::EINVAL,
                "not a device of this library",
            );
            0
        }
    }
}

/// `int ibv_get_device_index(struct ibv_device *device)`: its place in the registry.
#[no_mangle]
pub extern "C" fn iwarp_ibv_get_device_index(dev: *mut sys::ibv_device) -> c_int {
    let devices = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    devices
        .iter()
        .position(|d| std::ptr::eq(&d.dev, dev))
        .map(|i| i as c_int)
        .unwrap_or(-1)
}

/// `int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)`:
/// reads `dir/file` (trailing newline removed); bytes read, or -1.
#[no_mangle]
pub unsafe extern "C" fn iwarp_ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: NUL-terminated strings from the caller.
    let (d, f) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
    let path = Path::new(&*d.to_string_lossy()).join(&*f.to_string_lossy());
    let Ok(mut text) = std::fs::read(&path) else {
        set_errno(libc::ENOENT);
        return -1;
    };
    if text.last() == Some(&b'\n') {
        text.pop();
    }
    let n = text.len().min(size - 1);
    // SAFETY: buf holds `size` bytes; n + 1 <= size.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
    }
    n as c_int
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guid_is_the_eui64_of_the_mac() {
        assert_eq!(
            guid_from_mac([0x02, 0x00, 0x00, 0x12, 0x34, 0x56]),
            0x0000_00ff_fe12_3456
        );
        assert_eq!(
            guid_from_mac([0x52, 0x54, 0x00, 0xab, 0xcd, 0xef]),
            0x5054_00ff_feab_cdef
        );
    }

    #[test]
    fn device_names_come_from_the_socket() {
        assert_eq!(device_name_for(Path::new("/run/iwarpd/a.verbs")), "iwarp_a");
    }
}
