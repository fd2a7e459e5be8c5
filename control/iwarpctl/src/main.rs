//! iwarpctl: the operator's view of a running iwarpd (status, clients, objects, counters)
fn main() {}
