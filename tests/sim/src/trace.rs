//! One-line descriptions of frames, for tracing a run (`IWARP_SIM_TRACE=1`).

/// Describes an Ethernet frame: ARP, or IPv4/TCP with ports, flags, sequence numbers and
/// payload length; anything else by EtherType.
pub fn describe_frame(frame: &[u8]) -> String {
    let get = |i: usize| frame.get(i).copied().unwrap_or(0);
    let be16 = |i: usize| u16::from_be_bytes([get(i), get(i + 1)]);
    let be32 = |i: usize| u32::from_be_bytes([get(i), get(i + 1), get(i + 2), get(i + 3)]);
    if frame.len() < 14 {
        return format!("runt frame of {} bytes", frame.len());
    }
    match be16(12) {
        0x0806 => format!(
            "ARP op {} {}.{}.{}.{} -> {}.{}.{}.{}",
            be16(20),
            get(28),
            get(29),
            get(30),
            get(31),
            get(38),
            get(39),
            get(40),
            get(41)
        ),
        0x0800 => {
            let ip = 14;
            let ihl = usize::from(get(ip) & 0x0f) * 4;
            let total = usize::from(be16(ip + 2));
            if get(ip + 9) != 6 {
                return format!("IPv4 proto {} len {total}", get(ip + 9));
            }
            let t = ip + ihl;
            let doff = usize::from(get(t + 12) >> 4) * 4;
            let flags = get(t + 13);
            let names = [
                (0x02, 'S'),
                (0x10, '.'),
                (0x08, 'P'),
                (0x01, 'F'),
                (0x04, 'R'),
            ];
            let f: String = names
                .iter()
                .filter(|(b, _)| flags & b != 0)
                .map(|(_, c)| *c)
                .collect();
            let payload = total.saturating_sub(ihl + doff);
            // The first bytes of a short payload (MPA length, DDP/RDMAP control).
            let head: String = if payload > 0 && payload <= 64 {
                let start = t + doff;
                let bytes = frame.get(start..start + payload.min(24)).unwrap_or(&[]);
                let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
                format!(" [{}]", hex.join(""))
            } else {
                String::new()
            };
            format!(
                "{}.{}.{}.{}:{} > {}.{}.{}.{}:{} [{f}] seq {} ack {} win {} len {payload}{head}",
                get(ip + 12),
                get(ip + 13),
                get(ip + 14),
                get(ip + 15),
                be16(t),
                get(ip + 16),
                get(ip + 17),
                get(ip + 18),
                get(ip + 19),
                be16(t + 2),
                be32(t + 4),
                be32(t + 8),
                be16(t + 14),
            )
        }
        other => format!("EtherType {other:#06x}, {} bytes", frame.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_tcp_and_arp() {
        let mut f = vec![0u8; 54 + 4];
        f[12] = 0x08;
        f[14] = 0x45;
        f[16..18].copy_from_slice(&44u16.to_be_bytes());
        f[23] = 6;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&1000u16.to_be_bytes());
        f[36..38].copy_from_slice(&80u16.to_be_bytes());
        f[38..42].copy_from_slice(&7u32.to_be_bytes());
        f[46] = 0x50;
        f[47] = 0x12;
        let d = describe_frame(&f);
        assert!(d.starts_with("10.0.0.1:1000 > 10.0.0.2:80"), "{d}");
        assert!(d.contains("[S.]"), "{d}");
        assert!(d.contains("seq 7"), "{d}");
        assert!(d.contains("len 4"), "{d}");
        f[13] = 0x06;
        assert!(describe_frame(&f).starts_with("ARP"));
        assert!(describe_frame(&f[..5]).starts_with("runt"));
    }
}
