//! A fixed daemon state for the tests of the session and the renderers.

use iwarp_shm_socket::{
    ClientInfo, CounterSet, DaemonStatus, DeviceAttr, ObjectInfo, ObjectTotals, PortAttr, Welcome,
};

pub fn port() -> PortAttr {
    PortAttr {
        index: 0,
        ip: [198, 18, 0, 1],
        prefix_len: 24,
        mac: [0x02, 0, 0, 0, 0, 0x0a],
        mtu: 9000,
        device: "net_memif0,role=server".into(),
        link_up: true,
        speed_mbps: 10_000,
        ..PortAttr::default()
    }
}

pub fn totals() -> ObjectTotals {
    ObjectTotals {
        pds: 1,
        cqs: 2,
        qps: 3,
        srqs: 0,
        mrs: 4,
        mws: 1,
        cm_ids: 4,
        arenas: 1,
        arena_bytes: 16 << 20,
    }
}

pub fn status() -> DaemonStatus {
    DaemonStatus {
        name: "memif-a".into(),
        version: "0.1.0".into(),
        pid: 4242,
        uptime_s: 3723,
        cores: 1,
        ports: vec![port()],
        clients: 2,
        clients_total: 5,
        clients_tearing_down: 0,
        totals: totals(),
    }
}

pub fn clients() -> Vec<ClientInfo> {
    vec![
        ClientInfo {
            id: 1,
            name: "iwarp-perf".into(),
            pid: 100,
            uid: 0,
            gid: 0,
            connected_s: 61,
            totals: totals(),
        },
        ClientInfo {
            id: 7,
            name: "iwarpctl".into(),
            pid: 101,
            uid: 1000,
            gid: 1000,
            connected_s: 0,
            totals: ObjectTotals::default(),
        },
    ]
}

pub fn objects() -> Vec<ObjectInfo> {
    vec![
        ObjectInfo {
            client: 1,
            kind: "qp".into(),
            handle: 0x10001,
            core: Some(0),
            state: "RTS".into(),
            detail: vec![
                ("sq_posted".into(), "12".into()),
                ("peer".into(), "198.18.0.2:7471".into()),
            ],
        },
        ObjectInfo {
            client: 1,
            kind: "cq".into(),
            handle: 2,
            core: None,
            state: "ok".into(),
            detail: vec![("depth".into(), "1024".into())],
        },
        ObjectInfo {
            client: 1,
            kind: "mr".into(),
            handle: 0x0001_2a05,
            core: None,
            state: "valid".into(),
            detail: vec![],
        },
    ]
}

pub fn counters() -> Vec<CounterSet> {
    vec![
        CounterSet {
            core: Some(0),
            values: vec![("rx_frames".into(), 10), ("tx_frames".into(), 20)],
        },
        CounterSet {
            core: Some(1),
            values: vec![
                ("rx_frames".into(), 1),
                ("tx_frames".into(), 2),
                ("drops".into(), 3),
            ],
        },
        CounterSet {
            core: None,
            values: vec![
                ("rx_frames".into(), 11),
                ("tx_frames".into(), 22),
                ("drops".into(), 3),
            ],
        },
    ]
}

pub fn welcome() -> Welcome {
    Welcome {
        version: iwarp_shm_socket::PROTOCOL_VERSION,
        client_id: 7,
        ring_area_len: 64 << 20,
        doorbells: vec![4096],
        doorbell_bits: 4096,
        device: DeviceAttr {
            vendor: "iwarp".into(),
            daemon: "memif-a".into(),
            version: "0.1.0".into(),
            ports: 1,
            cores: 1,
            max_qp: 1024,
            max_qp_wr: 4096,
            max_sge: 4,
            max_cq: 1024,
            max_cqe: 65536,
            max_mr: 4096,
            max_mr_size: 1 << 30,
            max_pd: 64,
            max_srq: 64,
            max_srq_wr: 4096,
            max_ird: 16,
            max_ord: 16,
            max_arena_bytes: 1 << 32,
            max_private_data: 512,
            memory_windows: true,
            srq: true,
        },
        ports: vec![port()],
    }
}
