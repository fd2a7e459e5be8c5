//! The `*_str` helpers and the rate conversions of `<infiniband/verbs.h>`.

use std::ffi::{c_char, c_int, CStr};

fn pick(table: &'static [&'static CStr], i: c_int) -> *const c_char {
    usize::try_from(i)
        .ok()
        .and_then(|i| table.get(i))
        .map_or(c"unknown".as_ptr(), |s| s.as_ptr())
}

/// `const char *ibv_node_type_str(enum ibv_node_type)`.
#[no_mangle]
pub extern "C" fn iwarp_ibv_node_type_str(t: c_int) -> *const c_char {
    const T: &[&CStr] = &[
        c"unknown",
        c"InfiniBand channel adapter",
        c"InfiniBand switch",
        c"InfiniBand router",
        c"iWARP NIC",
        c"usNIC",
        c"usNIC UDP",
        c"unspecified",
    ];
    pick(T, t)
}

/// `const char *ibv_port_state_str(enum ibv_port_state)`.
#[no_mangle]
pub extern "C" fn iwarp_ibv_port_state_str(s: c_int) -> *const c_char {
    const T: &[&CStr] = &[
        c"PORT_NOP",
        c"PORT_DOWN",
        c"PORT_INIT",
        c"PORT_ARMED",
        c"PORT_ACTIVE",
        c"PORT_ACTIVE_DEFER",
    ];
    pick(T, s)
}

/// `const char *ibv_event_type_str(enum ibv_event_type)`.
#[no_mangle]
pub extern "C" fn iwarp_ibv_event_type_str(e: c_int) -> *const c_char {
    const T: &[&CStr] = &[
        c"CQ error",
        c"local work queue catastrophic error",
        c"invalid request local work queue error",
        c"local access violation work queue error",
        c"communication established",
        c"send queue drained",
        c"path migrated",
        c"path migration request error",
        c"local catastrophic error",
        c"port active",
        c"port error",
        c"LID change",
        c"P_Key change",
        c"SM change",
        c"SRQ catastrophic error",
        c"SRQ limit reached",
        c"last WQE reached",
        c"client reregistration",
        c"GID table change",
        c"WQ fatal",
    ];
    pick(T, e)
}

/// `const char *ibv_wc_status_str(enum ibv_wc_status)`.
#[no_mangle]
pub extern "C" fn iwarp_ibv_wc_status_str(s: c_int) -> *const c_char {
    const T: &[&CStr] = &[
        c"success",
        c"local length error",
        c"local QP operation error",
        c"local EE context operation error",
        c"local protection error",
        c"Work Request Flushed Error",
        c"memory bind operation error",
        c"bad response error",
        c"local access error",
        c"remote invalid request error",
        c"remote access error",
        c"remote operation error",
        c"transport retry counter exceeded",
        c"RNR retry counter exceeded",
        c"local RDD violation error",
        c"remote invalid RD request",
        c"aborted error",
        c"invalid EE context number",
        c"invalid EE context state",
        c"fatal error",
        c"response timeout error",
        c"general error",
        c"TM error",
        c"TM software rendezvous",
    ];
    pick(T, s)
}

/// `enum ibv_rate` values and their speed in Mbit/s.
const RATES: &[(c_int, c_int)] = &[
    (2, 2_500),
    (5, 5_000),
    (3, 10_000),
    (6, 20_000),
    (4, 30_000),
    (7, 40_000),
    (8, 60_000),
    (9, 80_000),
    (10, 120_000),
    (11, 14_062),
    (12, 56_250),
    (13, 112_500),
    (14, 168_750),
    (15, 25_781),
    (16, 103_125),
    (17, 206_250),
    (18, 309_375),
    (19, 28_125),
    (20, 53_125),
    (21, 425_000),
    (22, 637_500),
    (23, 850_000),
    (24, 1_275_000),
];

/// The first nine rates as multiples of 2.5 Gbit/s.
const MULTS: &[(c_int, c_int)] = &[
    (2, 1),
    (5, 2),
    (3, 4),
    (6, 8),
    (4, 12),
    (7, 16),
    (8, 24),
    (9, 32),
    (10, 48),
];

/// `int ibv_rate_to_mbps(enum ibv_rate)`: 0 if unknown.
#[no_mangle]
pub extern "C" fn iwarp_ibv_rate_to_mbps(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(0, |r| r.1)
}

/// `enum ibv_rate mbps_to_ibv_rate(int mbps)`: `IBV_RATE_MAX` (0) if none matches.
#[no_mangle]
pub extern "C" fn iwarp_mbps_to_ibv_rate(mbps: c_int) -> c_int {
    RATES.iter().find(|r| r.1 == mbps).map_or(0, |r| r.0)
}

/// `int ibv_rate_to_mult(enum ibv_rate)`: 0 if unknown.
#[no_mangle]
pub extern "C" fn iwarp_ibv_rate_to_mult(rate: c_int) -> c_int {
    MULTS.iter().find(|r| r.0 == rate).map_or(0, |r| r.1)
}

/// `enum ibv_rate mult_to_ibv_rate(int mult)`: `IBV_RATE_MAX` (0) if none matches.
#[no_mangle]
pub extern "C" fn iwarp_mult_to_ibv_rate(mult: c_int) -> c_int {
    MULTS.iter().find(|r| r.1 == mult).map_or(0, |r| r.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_rates() {
        // SAFETY: the functions return static NUL-terminated strings.
        let s = |p: *const c_char| unsafe { CStr::from_ptr(p) }.to_str().unwrap();
        assert_eq!(s(iwarp_ibv_node_type_str(4)), "iWARP NIC");
        assert_eq!(s(iwarp_ibv_port_state_str(4)), "PORT_ACTIVE");
        assert_eq!(s(iwarp_ibv_wc_status_str(5)), "Work Request Flushed Error");
        assert_eq!(s(iwarp_ibv_wc_status_str(-1)), "unknown");
        assert_eq!(iwarp_ibv_rate_to_mbps(3), 10_000);
        assert_eq!(iwarp_mbps_to_ibv_rate(10_000), 3);
        assert_eq!(iwarp_ibv_rate_to_mult(3), 4);
        assert_eq!(iwarp_mult_to_ibv_rate(4), 3);
    }
}
