//! The access policy of the verbs socket (docs/APPS.md, "Access policy"): root always;
//! otherwise the peer's uid in `allow_users`, or one of its groups in `allow_groups`.
//! Administration needs root or a uid in `admin_users`. Names are resolved once, at
//! start-up, from `/etc/passwd` and `/etc/group`; a name that does not resolve is an
//! error naming the configuration key.

use std::path::Path;

use iwarp_shm_socket::PeerCred;

/// Longest account database file read.
const DB_BYTES_MAX: u64 = 16 << 20;
/// Most supplementary groups considered per peer.
const PEER_GROUPS_MAX: usize = 1024;

/// What a peer may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Refused: `PermissionDenied`.
    Denied,
    /// A verbs client.
    User,
    /// A verbs client that may also make administration requests.
    Admin,
}

/// The resolved policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    allow_uids: Vec<u32>,
    allow_gids: Vec<u32>,
    admin_uids: Vec<u32>,
}

/// One line of `/etc/passwd` or `/etc/group`: name, id, and (groups) members.
fn parse_db(text: &str) -> Vec<(String, u32, Vec<String>)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let id = f.get(2)?.parse().ok()?;
            let members = f
                .get(3)
                .map(|m| {
                    m.split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            Some((f[0].to_string(), id, members))
        })
        .collect()
}

fn read_db(path: &Path) -> String {
    use std::io::Read;
    let mut s = String::new();
    if let Ok(f) = std::fs::File::open(path) {
        let _ = f.take(DB_BYTES_MAX).read_to_string(&mut s);
    }
    s
}

/// Where account names come from (files, so that tests can supply their own).
#[derive(Clone, Debug)]
pub struct AccountDb {
    users: Vec<(String, u32, Vec<String>)>,
    groups: Vec<(String, u32, Vec<String>)>,
}

impl AccountDb {
    /// `/etc/passwd` and `/etc/group`.
    pub fn system() -> AccountDb {
        AccountDb::from_files(Path::new("/etc/passwd"), Path::new("/etc/group"))
    }

    /// The given passwd and group files (missing files are empty).
    pub fn from_files(passwd: &Path, group: &Path) -> AccountDb {
        AccountDb::from_text(&read_db(passwd), &read_db(group))
    }

    /// From file contents.
    pub fn from_text(passwd: &str, group: &str) -> AccountDb {
        AccountDb {
            users: parse_db(passwd)
                .into_iter()
                .map(|(n, id, _)| (n, id, Vec::new()))
                .collect(),
            groups: parse_db(group),
        }
    }

    fn resolve(list: &[(String, u32, Vec<String>)], entry: &str) -> Option<u32> {
        if let Ok(id) = entry.parse::<u32>() {
            return Some(id);
        }
        list.iter()
            .find(|(n, _, _)| n == entry)
            .map(|(_, id, _)| *id)
    }

    /// Groups that list user `uid` as a member (by name).
    fn member_groups(&self, uid: u32) -> Vec<u32> {
        let Some((name, _, _)) = self.users.iter().find(|(_, id, _)| *id == uid) else {
            return Vec::new();
        };
        self.groups
            .iter()
            .filter(|(_, _, m)| m.iter().any(|x| x == name))
            .map(|(_, id, _)| *id)
            .collect()
    }
}

impl Policy {
    /// Resolves the three lists (`control.allow_users` etc.); an unknown name is an
    /// error naming its key.
    pub fn resolve(
        db: &AccountDb,
        allow_users: &[String],
        allow_groups: &[String],
        admin_users: &[String],
    ) -> Result<Policy, String> {
        let users = |key: &str, list: &[String]| -> Result<Vec<u32>, String> {
            list.iter()
                .enumerate()
                .map(|(i, e)| {
                    AccountDb::resolve(&db.users, e)
                        .ok_or_else(|| format!("control.{key}[{i}]: no user `{e}` in /etc/passwd"))
                })
                .collect()
        };
        let allow_gids = allow_groups
            .iter()
            .enumerate()
            .map(|(i, e)| {
                AccountDb::resolve(&db.groups, e).ok_or_else(|| {
                    format!("control.allow_groups[{i}]: no group `{e}` in /etc/group")
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Policy {
            allow_uids: users("allow_users", allow_users)?,
            allow_gids,
            admin_uids: users("admin_users", admin_users)?,
        })
    }

    /// Decides for a peer whose groups are `groups` (its primary gid included).
    pub fn admit_with_groups(&self, cred: &PeerCred, groups: &[u32]) -> Admission {
        if cred.uid == 0 || self.admin_uids.contains(&cred.uid) {
            return Admission::Admin;
        }
        if self.allow_uids.contains(&cred.uid) || groups.iter().any(|g| self.allow_gids.contains(g))
        {
            return Admission::User;
        }
        Admission::Denied
    }

    /// Decides for a connected peer: its gid, its supplementary groups
    /// (`/proc/<pid>/status`) and the groups that list it in `db`.
    pub fn admit(&self, cred: &PeerCred, db: &AccountDb) -> Admission {
        let mut groups = vec![cred.gid];
        if !self.allow_gids.is_empty() {
            groups.extend(proc_groups(cred.pid));
            groups.extend(db.member_groups(cred.uid));
        }
        self.admit_with_groups(cred, &groups)
    }
}

/// The supplementary groups of process `pid` (empty if it is gone).
fn proc_groups(pid: u32) -> Vec<u32> {
    let text = read_db(Path::new(&format!("/proc/{pid}/status")));
    text.lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .take(PEER_GROUPS_MAX)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/a:/bin/sh\nbob:x:1001:1001::/:/bin/sh\nops:x:1002:1002::/:/bin/sh\n#c:x:5:5\n";
    const GROUP: &str = "root:x:0:\nrdma:x:500:bob,carol\nalice:x:1000:\n";

    fn cred(uid: u32, gid: u32) -> PeerCred {
        PeerCred {
            pid: u32::MAX,
            uid,
            gid,
        }
    }

    #[test]
    fn root_users_groups_and_admins() {
        let db = AccountDb::from_text(PASSWD, GROUP);
        let p = Policy::resolve(
            &db,
            &["alice".into(), "2000".into()],
            &["rdma".into()],
            &["ops".into()],
        )
        .unwrap();
        assert_eq!(p.admit(&cred(0, 0), &db), Admission::Admin);
        assert_eq!(p.admit(&cred(1002, 1002), &db), Admission::Admin);
        assert_eq!(p.admit(&cred(1000, 1000), &db), Admission::User);
        assert_eq!(p.admit(&cred(2000, 7), &db), Admission::User, "numeric uid");
        assert_eq!(
            p.admit(&cred(1001, 1001), &db),
            Admission::User,
            "bob is in rdma by /etc/group"
        );
        assert_eq!(
            p.admit(&cred(3000, 500), &db),
            Admission::User,
            "primary group rdma"
        );
        assert_eq!(p.admit(&cred(65534, 65534), &db), Admission::Denied);
        assert_eq!(
            p.admit_with_groups(&cred(65534, 1), &[1, 500]),
            Admission::User
        );
    }

    #[test]
    fn the_default_policy_admits_root_only() {
        let db = AccountDb::from_text(PASSWD, GROUP);
        let p = Policy::resolve(&db, &[], &[], &[]).unwrap();
        assert_eq!(p.admit(&cred(0, 0), &db), Admission::Admin);
        assert_eq!(p.admit(&cred(1000, 1000), &db), Admission::Denied);
    }

    #[test]
    fn unknown_names_name_their_key() {
        let db = AccountDb::from_text(PASSWD, GROUP);
        let e = Policy::resolve(&db, &["alice".into(), "zed".into()], &[], &[]).unwrap_err();
        assert!(e.starts_with("control.allow_users[1]"), "{e}");
        let e = Policy::resolve(&db, &[], &["nogroup".into()], &[]).unwrap_err();
        assert!(e.starts_with("control.allow_groups[0]"), "{e}");
        let e = Policy::resolve(&db, &[], &[], &["c".into()]).unwrap_err();
        assert!(e.starts_with("control.admin_users[0]"), "{e}");
    }

    #[test]
    fn own_supplementary_groups_are_read() {
        let cred = PeerCred {
            pid: std::process::id(),
            uid: 4242,
            gid: 4242,
        };
        let db = AccountDb::from_text("", "");
        let mine = proc_groups(cred.pid);
        if let Some(&g) = mine.first() {
            let p = Policy::resolve(&db, &[], &[g.to_string()], &[]).unwrap();
            assert_eq!(p.admit(&cred, &db), Admission::User);
        }
    }
}
