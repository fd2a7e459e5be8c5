//! MPA (RFC 5044, RFC 6581): handshake, FPDU framing and deframing, markers, CRC
#![forbid(unsafe_code)]
