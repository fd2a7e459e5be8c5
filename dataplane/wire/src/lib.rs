//! Zero-copy checked views of the wire formats: Ethernet, ARP, IPv4, ICMP, TCP, MPA, DDP, RDMAP
#![forbid(unsafe_code)]
