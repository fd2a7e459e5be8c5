//! Sans-IO TCP built for MPA: FPDU-aligned segments, direct placement, retransmission re-read from registered memory
#![forbid(unsafe_code)]
