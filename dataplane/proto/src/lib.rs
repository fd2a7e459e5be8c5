//! The sans-IO iWARP engine: Ethernet/ARP/IPv4/ICMP, TCP, MPA, DDP, RDMAP and verbs per dataplane core
#![forbid(unsafe_code)]
