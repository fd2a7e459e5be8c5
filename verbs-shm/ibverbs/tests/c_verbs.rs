//! C programs compiled against the system's `<infiniband/verbs.h>` and linked against this
//! library, run against iwarpd: the structures, the ops table behind the header's inline
//! functions, and the errno conventions, as rdma-core's applications see them.

mod common;

use common::*;
use iwarp_apps_tests::{Daemon, SystemLock};

#[test]
fn verbs_objects_through_rdma_cores_header() {
    if !can_run_daemons("verbs_objects_through_rdma_cores_header") {
        return;
    }
    let lib = lib_dir("objects");
    let prog = compile_c("verbs_objects", &lib, &[]);
    let _lock = SystemLock::acquire();
    let d = Daemon::start_alone("ibvobj");
    let dir = temp_dir("objects");
    std::os::unix::fs::symlink(&d.socket, dir.join(format!("{}.verbs", d.name))).unwrap();
    let o = iwarp_run(&lib, &dir, &prog, &[]);
    let (out, err) = text(&o);
    assert!(
        o.status.success() && out.trim() == "ok",
        "verbs_objects failed ({}):\n{out}\n{err}\n{}",
        o.status,
        d.log_text()
    );
}
