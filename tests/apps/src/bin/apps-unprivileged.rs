//! Connects to a verbs socket (argument 1) and says `Hello`; prints the outcome. The
//! malicious-client suite runs it as user `nobody`, whom the default policy refuses.

use iwarp_shm_socket::{Channel, ClientMsg, Request, ServerMsg, PROTOCOL_VERSION};

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: apps-unprivileged SOCKET");
    let chan = match Channel::connect(std::path::Path::new(&path)) {
        Ok(c) => c,
        Err(e) => {
            println!("connect refused: {e}");
            std::process::exit(2);
        }
    };
    let _ = chan.set_recv_timeout(Some(std::time::Duration::from_secs(5)));
    let hello = ClientMsg {
        seq: 1,
        request: Request::Hello {
            version: PROTOCOL_VERSION,
            name: "unprivileged".into(),
        },
    };
    // A user the policy does not admit is answered and closed before the daemon reads
    // anything: the send may fail, the answer is there to read.
    if let Err(e) = chan.send(&hello, &[]) {
        println!("send refused: {e}");
    }
    let mut first = chan.recv::<ServerMsg>();
    // Closed before the daemon read the Hello: the reset comes first, the answer next.
    if matches!(&first, Err(iwarp_shm_socket::RecvError::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionReset)
    {
        first = chan.recv::<ServerMsg>();
    }
    match first {
        Ok((ServerMsg::Reply { result: Err(e), .. }, _)) => {
            println!("{:?}: {}", e.code, e.message);
            // The daemon closes the connection after refusing.
            let closed = matches!(
                chan.recv::<ServerMsg>(),
                Err(iwarp_shm_socket::RecvError::Closed)
            );
            println!("closed afterwards: {closed}");
        }
        other => {
            println!("admitted or no answer: {other:?}");
            std::process::exit(1);
        }
    }
}
