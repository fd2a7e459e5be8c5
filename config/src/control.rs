//! `[control]`: the verbs socket applications connect to (docs/APPS.md), who may use it,
//! and what one client may hold.

use serde::{Deserialize, Serialize};

use crate::daemon::SOCKET_PATH_LEN_MAX;
use crate::error::{ensure, ConfigError};

/// Most entries in each of `allow_users`, `allow_groups`, `admin_users`.
pub const POLICY_ENTRIES_MAX: usize = 256;
/// Most clients connected at once.
pub const CLIENTS_MAX: u32 = 4096;
/// Most arena memory one client may hold, MiB (1 TiB).
pub const ARENA_MB_MAX: u64 = 1 << 20;
/// Most verbs objects one client may hold (each kind counted separately).
pub const OBJECTS_MAX: u32 = 1 << 20;
/// Longest `hello_timeout_ms` (10 minutes).
pub const HELLO_TIMEOUT_MS_MAX: u64 = 600_000;

/// `[control]`: the control thread serving verbs clients.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControlSection {
    /// Serve the verbs socket.
    pub enabled: bool,
    /// Path of the verbs socket. Absent: `/run/iwarpd/<name>.verbs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket: Option<String>,
    /// Users (names or numeric ids, as strings) admitted besides root.
    pub allow_users: Vec<String>,
    /// Groups (names or numeric ids) whose members are admitted.
    pub allow_groups: Vec<String>,
    /// Users (besides root) allowed administration requests (iwarpctl).
    pub admin_users: Vec<String>,
    /// Clients connected at once.
    pub max_clients: u32,
    /// How long a connection may stay without saying `Hello`, ms.
    pub hello_timeout_ms: u64,
    /// Connections (welcomed or not yet) one user may hold; root and `admin_users` are
    /// exempt.
    pub max_conns_per_uid: u32,
    /// Connections that have not said `Hello` yet, all users together.
    pub max_pending: u32,
    /// Arena memory one client may hold, MiB.
    pub max_arena_mb: u64,
    /// Objects of each kind (PDs, CQs, QPs, SRQs, MRs, MWs, CM ids, arenas, channels)
    /// one client may hold.
    pub max_objects: u32,
    /// QPs one client may hold, below `max_objects`: a dataplane core holds
    /// `limits.max_qps`, so one client holding them all would lock every other client
    /// out of that core (scripts/isolation.sh).
    pub max_qps: u32,
}

impl Default for ControlSection {
    fn default() -> ControlSection {
        ControlSection {
            enabled: true,
            socket: None,
            allow_users: Vec::new(),
            allow_groups: Vec::new(),
            admin_users: Vec::new(),
            max_clients: 64,
            hello_timeout_ms: 5000,
            max_conns_per_uid: 32,
            max_pending: 64,
            max_arena_mb: 4096,
            max_objects: 4096,
            max_qps: 256,
        }
    }
}

impl ControlSection {
    /// The verbs socket path of daemon `name`, resolved.
    pub fn socket_path(&self, name: &str) -> String {
        match &self.socket {
            Some(p) => p.clone(),
            None => format!("/run/iwarpd/{name}.verbs"),
        }
    }

    pub(crate) fn validate(&self, name: &str) -> Result<(), ConfigError> {
        let p = self.socket_path(name);
        ensure(
            p.starts_with('/'),
            "control.socket",
            format!("`{p}` must be an absolute path"),
        )?;
        ensure(
            p.len() <= SOCKET_PATH_LEN_MAX,
            "control.socket",
            format!("`{p}` is longer than a unix socket path may be ({SOCKET_PATH_LEN_MAX} bytes)"),
        )?;
        for (key, list) in [
            ("allow_users", &self.allow_users),
            ("allow_groups", &self.allow_groups),
            ("admin_users", &self.admin_users),
        ] {
            ensure(
                list.len() <= POLICY_ENTRIES_MAX,
                format!("control.{key}"),
                format!("at most {POLICY_ENTRIES_MAX} entries"),
            )?;
            for (i, entry) in list.iter().enumerate() {
                ensure(
                    is_account_name(entry),
                    format!("control.{key}[{i}]"),
                    format!("`{entry}` is neither a numeric id nor a user or group name (letters, digits, `_`, `-`, `.`; at most 32)"),
                )?;
            }
        }
        ensure(
            (1..=CLIENTS_MAX).contains(&self.max_clients),
            "control.max_clients",
            format!("must be in 1..={CLIENTS_MAX}"),
        )?;
        ensure(
            (1..=HELLO_TIMEOUT_MS_MAX).contains(&self.hello_timeout_ms),
            "control.hello_timeout_ms",
            format!("must be in 1..={HELLO_TIMEOUT_MS_MAX}"),
        )?;
        ensure(
            (1..=CLIENTS_MAX).contains(&self.max_conns_per_uid),
            "control.max_conns_per_uid",
            format!("must be in 1..={CLIENTS_MAX}"),
        )?;
        ensure(
            (1..=CLIENTS_MAX).contains(&self.max_pending),
            "control.max_pending",
            format!("must be in 1..={CLIENTS_MAX}"),
        )?;
        ensure(
            (1..=ARENA_MB_MAX).contains(&self.max_arena_mb),
            "control.max_arena_mb",
            format!("must be in 1..={ARENA_MB_MAX}"),
        )?;
        ensure(
            (1..=OBJECTS_MAX).contains(&self.max_objects),
            "control.max_objects",
            format!("must be in 1..={OBJECTS_MAX}"),
        )?;
        ensure(
            (1..=OBJECTS_MAX).contains(&self.max_qps),
            "control.max_qps",
            format!("must be in 1..={OBJECTS_MAX}"),
        )
    }
}

/// A numeric id, or a name as `useradd` accepts it (a trailing `$` for machine
/// accounts).
fn is_account_name(s: &str) -> bool {
    if s.is_empty() || s.len() > 32 {
        return false;
    }
    if s.bytes().all(|c| c.is_ascii_digit()) {
        return s.parse::<u32>().is_ok();
    }
    let body = s.strip_suffix('$').unwrap_or(s);
    !body.is_empty()
        && !body.starts_with('-')
        && body
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(f: impl FnOnce(&mut ControlSection)) -> String {
        let mut c = ControlSection::default();
        f(&mut c);
        c.validate("d").unwrap_err().field
    }

    #[test]
    fn defaults_and_socket_path() {
        let c = ControlSection::default();
        c.validate("d").unwrap();
        assert!(c.enabled);
        assert_eq!(c.socket_path("d"), "/run/iwarpd/d.verbs");
        let c = ControlSection {
            socket: Some("/tmp/x.verbs".into()),
            allow_users: vec!["alice".into(), "1000".into(), "build$".into()],
            allow_groups: vec!["rdma".into()],
            admin_users: vec!["ops.admin".into()],
            ..c
        };
        c.validate("d").unwrap();
        assert_eq!(c.socket_path("d"), "/tmp/x.verbs");
    }

    #[test]
    fn rules_name_their_field() {
        assert_eq!(err(|c| c.socket = Some("rel".into())), "control.socket");
        assert_eq!(err(|c| c.socket = Some(String::new())), "control.socket");
        assert_eq!(
            err(|c| c.socket = Some(format!("/{}", "s".repeat(120)))),
            "control.socket"
        );
        assert_eq!(
            err(|c| c.allow_users = vec!["ok".into(), "bad name".into()]),
            "control.allow_users[1]"
        );
        assert_eq!(
            err(|c| c.allow_groups = vec!["-x".into()]),
            "control.allow_groups[0]"
        );
        assert_eq!(
            err(|c| c.admin_users = vec!["99999999999".into()]),
            "control.admin_users[0]"
        );
        assert_eq!(
            err(|c| c.allow_users = vec!["a".into(); POLICY_ENTRIES_MAX + 1]),
            "control.allow_users"
        );
        assert_eq!(err(|c| c.max_clients = 0), "control.max_clients");
        assert_eq!(err(|c| c.hello_timeout_ms = 0), "control.hello_timeout_ms");
        assert_eq!(
            err(|c| c.hello_timeout_ms = HELLO_TIMEOUT_MS_MAX + 1),
            "control.hello_timeout_ms"
        );
        assert_eq!(
            err(|c| c.max_conns_per_uid = 0),
            "control.max_conns_per_uid"
        );
        assert_eq!(
            err(|c| c.max_conns_per_uid = CLIENTS_MAX + 1),
            "control.max_conns_per_uid"
        );
        assert_eq!(err(|c| c.max_pending = 0), "control.max_pending");
        assert_eq!(
            err(|c| c.max_pending = CLIENTS_MAX + 1),
            "control.max_pending"
        );
        assert_eq!(err(|c| c.max_arena_mb = 0), "control.max_arena_mb");
        assert_eq!(
            err(|c| c.max_objects = OBJECTS_MAX + 1),
            "control.max_objects"
        );
    }
}
