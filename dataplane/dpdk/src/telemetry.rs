//! Commands of DPDK telemetry (the socket `dpdk-telemetry.py` reads) answered from Rust:
//! each command's answer is a dict of counters (`name -> u64`) a [`Source`] gives. The
//! callback runs on DPDK's telemetry thread, never on a dataplane core; a source reads
//! published counters (atomics), it does not ask the cores.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::{Arc, Mutex, OnceLock};

use iwarp_dpdk_sys as sys;

use crate::error::DpdkError;

/// What a command answers: the counters for its parameter (the text after the comma in
/// `/cmd,param`; `None` without one), or why not (the client gets an error).
pub type Source = Arc<dyn Fn(Option<&str>) -> Result<Vec<(String, u64)>, String> + Send + Sync>;

/// The registered commands by name (the telemetry thread reads it per request).
fn sources() -> &'static Mutex<HashMap<String, Source>> {
    static SOURCES: OnceLock<Mutex<HashMap<String, Source>>> = OnceLock::new();
    SOURCES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Registers `cmd` (e.g. `/iwarp/counters`; at most 55 bytes, starting with `/`) with
/// `help`. Needs the EAL initialised with telemetry on; a name registered twice keeps
/// the first source (DPDK refuses the second registration).
pub fn register(cmd: &str, help: &str, source: Source) -> Result<(), DpdkError> {
    let arg = |what: &'static str, value: &str| {
        CString::new(value).map_err(|_| DpdkError::InvalidArgument {
            what,
            value: value.to_string(),
        })
    };
    let c_cmd = arg("telemetry command", cmd)?;
    let c_help = arg("telemetry help", help)?;
    if let Ok(mut m) = sources().lock() {
        m.entry(cmd.to_string()).or_insert(source);
    }
    // SAFETY: both strings are NUL-terminated and live for the call (DPDK copies them
    // into its own table); `answer` has the `telemetry_cb` signature and is 'static.
    let rc =
        unsafe { sys::rte_telemetry_register_cmd(c_cmd.as_ptr(), Some(answer), c_help.as_ptr()) };
    if rc != 0 {
        return Err(crate::error::call_error(
            "rte_telemetry_register_cmd",
            cmd,
            rc,
        ));
    }
    Ok(())
}

/// The callback of every registered command: finds its source, fills `d` with a dict.
/// A negative return (`-EINVAL`: unknown command, bad parameter) is an error to the client.
unsafe extern "C" fn answer(
    cmd: *const c_char,
    params: *const c_char,
    d: *mut sys::rte_tel_data,
) -> c_int {
    if cmd.is_null() || d.is_null() {
        return -libc::EINVAL;
    }
    // SAFETY: DPDK passes the NUL-terminated command it matched, valid for the call.
    let name = unsafe { CStr::from_ptr(cmd) }
        .to_string_lossy()
        .into_owned();
    let param = if params.is_null() {
        None
    } else {
        // SAFETY: as above, the parameter text (possibly empty) of this request.
        Some(
            unsafe { CStr::from_ptr(params) }
                .to_string_lossy()
                .into_owned(),
        )
    };
    let source = match sources().lock() {
        Ok(m) => m.get(&name).cloned(),
        Err(_) => None,
    };
    let Some(source) = source else {
        return -libc::EINVAL;
    };
    let values = match source(param.as_deref().filter(|p| !p.is_empty())) {
        Ok(v) => v,
        Err(_) => return -libc::EINVAL,
    };
    // SAFETY: `d` is the container DPDK gives this request, valid for the call.
    unsafe { sys::rte_tel_data_start_dict(d) };
    let max_entries = sys::RTE_TEL_MAX_DICT_ENTRIES as usize;
    let max_name = sys::RTE_TEL_MAX_STRING_LEN as usize - 1;
    for (k, v) in values.into_iter().take(max_entries) {
        let mut k = k;
        k.truncate(max_name);
        let Ok(k) = CString::new(k) else { continue };
        // SAFETY: `d` was started as a dict above; the name is NUL-terminated and
        // shorter than RTE_TEL_MAX_STRING_LEN; DPDK copies it.
        unsafe { sys::rte_tel_data_add_dict_u64(d, k.as_ptr(), v) };
    }
    0
}
