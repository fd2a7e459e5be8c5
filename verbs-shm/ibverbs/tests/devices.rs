//! Debian's unmodified `ibv_devices` and `ibv_devinfo -v` (ibverbs-utils, linked against
//! rdma-core's libibverbs.so.1) run through `scripts/iwarp-run` against a running iwarpd
//! and print its device: name, GUID, transport, limits, port, GID.

mod common;

use common::*;
use iwarp_apps::{Daemon, SystemLock};

/// The value printed after `key:` on a line of `ibv_devinfo` (tabs trimmed).
fn field<'a>(out: &'a str, key: &str) -> Option<&'a str> {
    out.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(':')))
        .map(str::trim)
}

#[test]
fn ibv_devices_and_ibv_devinfo_show_a_running_daemon() {
    if !can_run_daemons("ibv_devices_and_ibv_devinfo_show_a_running_daemon") {
        return;
    }
    let (Some(devices), Some(devinfo)) = (need_program("ibv_devices"), need_program("ibv_devinfo"))
    else {
        return;
    };
    let _lock = SystemLock::acquire();
    let d = Daemon::start_alone("ibvdev");
    // A directory listing this daemon only (other daemons of the machine stay out).
    let dir = temp_dir("devices");
    std::os::unix::fs::symlink(&d.socket, dir.join(format!("{}.verbs", d.name))).unwrap();
    let lib = lib_dir("devices");
    let client = iwarp_verbs::Context::open_path(&d.socket).expect("client of the daemon");
    let attr = client.device_attr().clone();
    let port = client.ports()[0].clone();
    drop(client);
    let name = format!("iwarp_{}", d.name);
    let guid = ibverbs::guid_from_mac(port.mac);

    let o = iwarp_run(&lib, &dir, &devices, &[]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "ibv_devices failed:\n{out}\n{err}");
    let line = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))
        .unwrap_or_else(|| panic!("ibv_devices does not list {name}:\n{out}\n{err}"));
    assert_eq!(
        line.split_whitespace().nth(1),
        Some(format!("{guid:016x}").as_str()),
        "{out}"
    );

    let o = iwarp_run(&lib, &dir, &devinfo, &["-v"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "ibv_devinfo -v failed:\n{out}\n{err}");
    let g = format!("{guid:016x}");
    let guid_colons = format!("{}:{}:{}:{}", &g[0..4], &g[4..8], &g[8..12], &g[12..16]);
    let ip = port.ip;
    let gid = format!(
        "0000:0000:0000:0000:0000:ffff:{:02x}{:02x}:{:02x}{:02x}",
        ip[0], ip[1], ip[2], ip[3]
    );
    let state = if port.link_up {
        "PORT_ACTIVE (4)"
    } else {
        "PORT_DOWN (1)"
    };
    let expect = [
        ("hca_id", name.clone()),
        ("transport", "iWARP (1)".into()),
        ("node_guid", guid_colons.clone()),
        ("sys_image_guid", guid_colons),
        ("phys_port_cnt", "1".into()),
        ("max_qp", attr.max_qp.to_string()),
        ("max_qp_wr", attr.max_qp_wr.to_string()),
        ("max_sge", attr.max_sge.to_string()),
        ("max_cq", attr.max_cq.to_string()),
        ("max_cqe", attr.max_cqe.to_string()),
        ("max_mr", attr.max_mr.to_string()),
        ("max_pd", attr.max_pd.to_string()),
        ("max_srq", attr.max_srq.to_string()),
        ("max_srq_wr", attr.max_srq_wr.to_string()),
        ("max_qp_rd_atom", attr.max_ird.to_string()),
        ("max_qp_init_rd_atom", attr.max_ord.to_string()),
        ("max_mr_size", format!("{:#x}", attr.max_mr_size)),
        ("atomic_cap", "ATOMIC_NONE (0)".into()),
        ("state", state.into()),
        ("link_layer", "Ethernet".into()),
        ("max_mtu", "1024 (3)".into()),
        ("gid_tbl_len", "1".into()),
    ];
    for (k, v) in expect {
        assert_eq!(
            field(&out, k),
            Some(v.as_str()),
            "ibv_devinfo -v, {k}:\n{out}\n{err}"
        );
    }
    let gid_line = out
        .lines()
        .find(|l| l.trim_start().starts_with("GID[  0]:"))
        .unwrap_or_else(|| panic!("no GID[0] line:\n{out}"));
    assert!(gid_line.contains(&gid), "GID {gid} expected: {gid_line}");
}

#[test]
fn without_a_daemon_the_list_is_empty_and_iwarp_debug_says_why() {
    let Some(devinfo) = need_program("ibv_devinfo") else {
        return;
    };
    let dir = temp_dir("nodaemon");
    // A socket file nobody listens on: a daemon that died.
    let stale = dir.join("gone.verbs");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let lib = lib_dir("nodaemon");
    let o = iwarp_run(&lib, &dir, &devinfo, &[]);
    let (out, err) = text(&o);
    assert!(
        !o.status.success(),
        "ibv_devinfo succeeded without a daemon:\n{out}\n{err}"
    );
    assert!(err.contains("No IB devices found"), "{err}");
    assert!(
        err.contains("no device for") && err.contains("gone.verbs"),
        "IWARP_DEBUG names the dead socket: {err}"
    );
    assert!(err.contains("the device list is empty"), "{err}");
}
