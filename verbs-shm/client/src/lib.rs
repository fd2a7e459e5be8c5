//! The verbs client library: control socket to iwarpd, posts and polls through shared-memory rings
