/* The DPDK headers the binding covers, plus the shim's prototypes. */
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_launch.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_bus_vdev.h>
#include <rte_interrupts.h>
#include <rte_memory.h>
#include <rte_mempool.h>
#include <rte_mbuf.h>
#include <rte_ether.h>
#include <rte_ethdev.h>
#include <rte_telemetry.h>
#include "shim.h"
