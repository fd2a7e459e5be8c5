//! Errors of the DPDK wrappers: each names what failed and, where DPDK said why, its text.

use std::ffi::CStr;
use std::fmt;

/// Why a DPDK call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DpdkError {
    /// The EAL is already initialised (or was, and was cleaned up) in this process; DPDK
    /// allows one EAL per process.
    EalAlreadyInitialised,
    /// An argument could not be passed to C (it contains a NUL byte).
    InvalidArgument {
        /// What the argument is.
        what: &'static str,
        /// Its value.
        value: String,
    },
    /// `rte_eal_init` failed.
    EalInit {
        /// `rte_strerror(rte_errno)`.
        reason: String,
    },
    /// The vdev string names a driver this DPDK does not have.
    UnknownDriver {
        /// The device string as given.
        device: String,
        /// The driver part of it (e.g. `net_foo`).
        driver: String,
    },
    /// The device (PCI address or vdev) could not be found or probed.
    DeviceNotFound {
        /// The device string as given.
        device: String,
        /// What DPDK said.
        reason: String,
    },
    /// A memif server socket is already served by another process.
    MemifSocketInUse {
        /// The socket name from the vdev string.
        socket: String,
    },
    /// The port has no queue to give, or the configuration asks for none.
    NoQueues {
        /// The port's name.
        port: String,
        /// Details (requested vs available).
        detail: String,
    },
    /// A configuration value exceeds what the port allows.
    Limit {
        /// The port's name.
        port: String,
        /// The configuration field.
        field: &'static str,
        /// The requested value.
        value: u64,
        /// The port's limit.
        limit: u64,
    },
    /// A DPDK call returned an error.
    Call {
        /// The function that failed.
        call: &'static str,
        /// The object it was called on (a port or pool name).
        on: String,
        /// `rte_strerror` of the error.
        reason: String,
    },
    /// The object is in use (e.g. a port with live queues cannot be stopped).
    Busy {
        /// What is busy and why.
        what: String,
    },
    /// The call is not valid in the object's current state.
    State {
        /// What was expected.
        what: String,
    },
}

impl fmt::Display for DpdkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DpdkError::EalAlreadyInitialised => {
                write!(f, "the DPDK EAL was already initialised in this process (one EAL per process)")
            }
            DpdkError::InvalidArgument { what, value } => {
                write!(f, "{what} {value:?} contains a NUL byte")
            }
            DpdkError::EalInit { reason } => write!(f, "DPDK EAL initialisation failed: {reason}"),
            DpdkError::UnknownDriver { device, driver } => write!(
                f,
                "device {device:?}: unknown driver {driver:?} (not a DPDK driver of this installation)"
            ),
            DpdkError::DeviceNotFound { device, reason } => {
                write!(f, "device {device:?} not found or could not be probed: {reason}")
            }
            DpdkError::MemifSocketInUse { socket } => write!(
                f,
                "memif socket {socket:?} is already in use by another memif server (another process \
                 serves it; stop it or choose another socket=)"
            ),
            DpdkError::NoQueues { port, detail } => write!(f, "port {port}: no queues: {detail}"),
            DpdkError::Limit { port, field, value, limit } => {
                write!(f, "port {port}: {field} {value} exceeds the port's limit {limit}")
            }
            DpdkError::Call { call, on, reason } => write!(f, "{call} on {on} failed: {reason}"),
            DpdkError::Busy { what } => write!(f, "busy: {what}"),
            DpdkError::State { what } => write!(f, "wrong state: {what}"),
        }
    }
}

impl std::error::Error for DpdkError {}

/// The text DPDK gives for an error number (`rte_strerror`, which also knows DPDK's own
/// codes above `RTE_MAX_ERRNO`). Accepts negative return values as they come.
pub fn strerror(code: i32) -> String {
    let code = code.checked_abs().unwrap_or(i32::MAX);
    // SAFETY: rte_strerror accepts any value and returns a pointer to a static or
    // thread-local NUL-terminated string, which we copy at once.
    let ptr = unsafe { iwarp_dpdk_sys::rte_strerror(code) };
    if ptr.is_null() {
        return format!("error {code}");
    }
    // SAFETY: non-null, NUL-terminated, valid until the next rte_strerror call on this thread.
    let text = unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned();
    format!("{text} (errno {code})")
}

/// `rte_errno` of the calling thread.
pub fn rte_errno() -> i32 {
    // SAFETY: reads a thread-local int through the shim; no preconditions.
    unsafe { iwarp_dpdk_sys::shim_errno() }
}

/// Builds a [`DpdkError::Call`] from a negative return value (or `rte_errno` if the value
/// is not an error code).
pub(crate) fn call_error(call: &'static str, on: impl Into<String>, ret: i32) -> DpdkError {
    let code = if ret < 0 { ret } else { rte_errno() };
    DpdkError::Call {
        call,
        on: on.into(),
        reason: strerror(code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_name_the_field_the_value_and_the_limit() {
        let e = DpdkError::Limit {
            port: "net_tap0".into(),
            field: "mtu",
            value: 9000,
            limit: 1500,
        };
        assert_eq!(
            e.to_string(),
            "port net_tap0: mtu 9000 exceeds the port's limit 1500"
        );
        let e = DpdkError::MemifSocketInUse {
            socket: "/run/a.sock".into(),
        };
        assert!(e
            .to_string()
            .contains("\"/run/a.sock\" is already in use by another memif server"));
        let e = DpdkError::UnknownDriver {
            device: "net_foo0,x=1".into(),
            driver: "net_foo".into(),
        };
        assert!(e.to_string().contains("unknown driver \"net_foo\""));
        let e = DpdkError::EalAlreadyInitialised;
        assert!(e.to_string().contains("one EAL per process"));
    }
}
