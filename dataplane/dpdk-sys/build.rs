//! Builds the binding: DPDK's compile flags from pkg-config, the C shim compiled with
//! exactly those flags, bindgen over `csrc/wrapper.h`, and dynamic linking against the
//! libraries pkg-config names plus `rte_bus_vdev` (where `rte_vdev_init` lives).

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// Functions the safe wrappers call, plus what issue 4 needs (extmem, extbuf, DMA map).
const FUNCTIONS: &[&str] = &[
    "shim_.*",
    "rte_eal_init",
    "rte_eal_cleanup",
    "rte_strerror",
    "rte_eal_remote_launch",
    "rte_eal_wait_lcore",
    "rte_eal_get_lcore_state",
    "rte_get_next_lcore",
    "rte_get_main_lcore",
    "rte_lcore_count",
    "rte_lcore_is_enabled",
    "rte_lcore_to_socket_id",
    "rte_socket_id",
    "rte_thread_is_intr",
    "rte_pktmbuf_pool_create",
    "rte_pktmbuf_pool_create_extbuf",
    "rte_mempool_free",
    "rte_mempool_avail_count",
    "rte_mempool_in_use_count",
    "rte_dev_probe",
    "rte_dev_remove",
    "rte_eal_hotplug_add",
    "rte_eal_hotplug_remove",
    "rte_vdev_init",
    "rte_vdev_uninit",
    "rte_eth_dev_configure",
    "rte_eth_dev_info_get",
    "rte_eth_dev_start",
    "rte_eth_dev_stop",
    "rte_eth_dev_close",
    "rte_eth_dev_get_port_by_name",
    "rte_eth_dev_get_name_by_port",
    "rte_eth_dev_count_avail",
    "rte_eth_dev_is_valid_port",
    "rte_eth_dev_socket_id",
    "rte_eth_dev_set_mtu",
    "rte_eth_dev_get_mtu",
    "rte_eth_dev_rss_reta_update",
    "rte_eth_dev_rss_hash_update",
    "rte_eth_dev_callback_register",
    "rte_eth_dev_callback_unregister",
    "rte_eth_rx_queue_setup",
    "rte_eth_tx_queue_setup",
    "rte_eth_link_get_nowait",
    "rte_eth_macaddr_get",
    "rte_eth_promiscuous_enable",
    "rte_eth_promiscuous_disable",
    "rte_eth_promiscuous_get",
    "rte_eth_stats_get",
    "rte_eth_stats_reset",
    "rte_eth_xstats_get_id_by_name",
    "rte_eth_xstats_get_by_id",
    "rte_extmem_register",
    "rte_extmem_unregister",
    "rte_dev_dma_map",
    "rte_dev_dma_unmap",
    "rte_mem_virt2iova",
    "rte_telemetry_register_cmd",
    "rte_tel_data_start_dict",
    "rte_tel_data_add_dict_u64",
];

/// Constants (most are `#define`s; `clang_macro_fallback` recovers the `RTE_BIT64` ones).
const VARS: &[&str] = &[
    "RTE_ETH_RX_OFFLOAD_.*",
    "RTE_ETH_TX_OFFLOAD_.*",
    "RTE_ETH_RSS_.*",
    "RTE_ETH_LINK_.*",
    "RTE_ETH_MQ_.*",
    "RTE_ETH_EVENT_.*",
    "RTE_ETH_HASH_FUNCTION_.*",
    "RTE_ETH_RETA_GROUP_SIZE",
    "RTE_ETH_NAME_MAX_LEN",
    "RTE_ETH_XSTATS_NAME_SIZE",
    "RTE_ETH_DEV_.*",
    "RTE_MBUF_F_.*",
    "RTE_MBUF_DEFAULT_.*",
    "RTE_PKTMBUF_HEADROOM",
    "RTE_MAX_LCORE",
    "RTE_MAX_ETHPORTS",
    "RTE_LCORE_.*",
    "RTE_ETHER_.*",
    "RTE_BAD_IOVA",
    "SOCKET_ID_ANY",
    "RTE_TEL_MAX_.*",
    "SHIM_.*",
];

/// Types whose packed+aligned layout rustc rejects (E0588); Rust parses those headers itself.
const OPAQUE: &[&str] = &["rte_arp_ipv4", "rte_arp_hdr", "rte_l2tpv2_combined_msg_hdr"];

fn cflags() -> Vec<String> {
    let out = Command::new("pkg-config")
        .args(["--cflags", "libdpdk"])
        .output()
        .expect("running pkg-config --cflags libdpdk (install pkg-config and libdpdk-dev)");
    assert!(
        out.status.success(),
        "pkg-config --cflags libdpdk failed: {} (install libdpdk-dev)",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("pkg-config output is UTF-8");
    let mut flags: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
    flags.push("-DALLOW_EXPERIMENTAL_API".to_owned());
    flags
}

fn main() {
    println!("cargo:rerun-if-changed=csrc/shim.c");
    println!("cargo:rerun-if-changed=csrc/shim.h");
    println!("cargo:rerun-if-changed=csrc/wrapper.h");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let flags = cflags();

    // Link: every library pkg-config names (emitted by the probe), plus the vdev bus.
    let lib = pkg_config::Config::new()
        .atleast_version("22.11")
        .probe("libdpdk")
        .expect("pkg-config finds libdpdk >= 22.11 (install libdpdk-dev)");
    drop(lib);
    println!("cargo:rustc-link-lib=dylib=rte_bus_vdev");

    let mut build = cc::Build::new();
    build.file("csrc/shim.c").include("csrc").warnings(true);
    for f in &flags {
        build.flag(f);
    }
    build.compile("iwarp_dpdk_shim");

    let mut builder = bindgen::Builder::default()
        .header("csrc/wrapper.h")
        .clang_arg("-Icsrc")
        .clang_args(flags.iter().cloned())
        .clang_macro_fallback()
        .allowlist_recursively(true)
        .blocklist_type("max_align_t")
        .derive_default(true)
        .derive_debug(false)
        .layout_tests(true)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .rust_target(bindgen::RustTarget::stable(85, 0).expect("a Rust version bindgen knows"))
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for f in FUNCTIONS {
        builder = builder.allowlist_function(f);
    }
    for v in VARS {
        builder = builder.allowlist_var(v);
    }
    for t in OPAQUE {
        builder = builder.opaque_type(t);
    }
    let bindings = builder.generate().expect("bindgen over DPDK headers");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR set by cargo"));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("writing bindings.rs");
}
