//! DDP and RDMAP with verbs semantics: PDs, CQs, SRQs, QPs, memory regions and windows
#![forbid(unsafe_code)]
