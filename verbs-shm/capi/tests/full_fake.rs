//! A daemon that serves `control.max_clients` clients already refuses a new connection
//! with `DaemonFull` before reading anything: the C caller gets `-IWV_EDAEMONFULL` with
//! its own sentence, never `-IWV_EDAEMONGONE`.

use std::ffi::{CStr, CString};

use iwarp_shm_socket::{ErrorCode, ErrorReply, Listener, ServerMsg};
use iwarp_verbs_capi::codes::*;
use iwarp_verbs_capi::*;

#[test]
fn a_full_daemon_answers_edaemonfull() {
    let socket = std::env::temp_dir().join(format!("iwv-full-{}.verbs", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let listener = Listener::bind(&socket, 4).unwrap();
    let daemon = std::thread::spawn(move || {
        let chan = listener.accept().unwrap().unwrap();
        chan.send(
            &ServerMsg::Reply {
                seq: 0,
                result: Err(ErrorReply::new(
                    ErrorCode::DaemonFull,
                    "iwarpd serves control.max_clients (2) clients already",
                )),
            },
            &[],
        )
        .unwrap();
    });
    let path = CString::new(socket.to_str().unwrap()).unwrap();
    // SAFETY: `path` is a NUL-terminated string that outlives the call.
    let ctx = unsafe { iwv_open_path(path.as_ptr()) };
    daemon.join().unwrap();
    let _ = std::fs::remove_file(&socket);
    assert!(ctx.is_null());
    assert_eq!(iwv_last_error(), -IWV_EDAEMONFULL);
    // SAFETY: both return NUL-terminated strings valid until the thread's next failure.
    let (sentence, message) = unsafe {
        (
            CStr::from_ptr(iwv_strerror(-IWV_EDAEMONFULL)),
            CStr::from_ptr(iwv_last_error_message()),
        )
    };
    let (sentence, message) = (sentence.to_str().unwrap(), message.to_str().unwrap());
    assert!(sentence.starts_with("iwarpd is full"), "{sentence}");
    assert!(message.contains("max_clients"), "{message}");
    assert!(!message.contains("gone"), "{message}");
}
