//! `iwarpctl`: the operator's view of a running iwarpd over its verbs socket.
//!
//! ```text
//! iwarpctl [--name NAME | --socket PATH] status|clients|qps|cqs|mrs|counters [--json]
//! iwarpctl [...] counters --watch SECONDS [--count N] [--json]
//! iwarpctl [...] disconnect-client ID | qp reset --client CLIENT ID   (admin only)
//! ```
//!
//! Exit codes: 0 success; 1 the daemon refused or failed the request; 2 usage error;
//! 3 the daemon is not running; 4 permission denied; 5 protocol version mismatch;
//! 6 other communication failure (timeout, malformed or unexpected answer).

mod cli;
mod conn;
#[cfg(test)]
mod fixture;
mod render;
mod table;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use iwarp_shm_socket::{AdminRequest, AdminResponse};

use cli::{CaptureCommand, Cli, Command, CounterArgs, QpCommand};
use conn::{AdminSession, CtlError};

/// What a command prints: the text for a terminal, or a JSON document.
fn output(cli: &Cli, answer: AdminResponse) -> Result<String, CtlError> {
    let kinds = cli.command.object_kinds();
    let text = match (answer, cli.json) {
        (AdminResponse::Status(s), false) if cli.command == Command::Ports => {
            render::ports_text(&s.ports)
        }
        (AdminResponse::Status(s), true) if cli.command == Command::Ports => {
            json(render::ports_json(&s.ports))
        }
        (AdminResponse::Status(s), false) => render::status_text(&s),
        (AdminResponse::Status(s), true) => json(render::status_json(&s)),
        (AdminResponse::Clients(c), false) => render::clients_text(&c),
        (AdminResponse::Clients(c), true) => json(render::clients_json(&c)),
        (AdminResponse::Objects(o), false) => render::objects_text(&o, kinds.unwrap_or(&[])),
        (AdminResponse::Objects(o), true) => json(render::objects_json(&o, kinds.unwrap_or(&[]))),
        (AdminResponse::Counters(c), false) => render::counters_text(&c),
        (AdminResponse::Counters(c), true) => json(render::counters_json(&c)),
        (AdminResponse::Done(what), false) => format!("{what}\n"),
        (AdminResponse::Done(what), true) => json(serde_json::json!({ "done": what })),
    };
    Ok(text)
}

fn json(v: serde_json::Value) -> String {
    // A `Value` always serializes.
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}

/// The Admin request behind a command.
fn request(cmd: &Command) -> AdminRequest {
    match *cmd {
        Command::Status | Command::Ports => AdminRequest::Status,
        Command::Clients => AdminRequest::Clients,
        Command::Qps(f) | Command::Cqs(f) | Command::Mrs(f) => AdminRequest::Objects(f.client),
        Command::Counters(_) => AdminRequest::Counters,
        Command::DisconnectClient { id } => AdminRequest::DisconnectClient(id),
        Command::Qp(QpCommand::Reset { id, client }) => AdminRequest::ResetQp { client, qp: id },
        Command::Capture(CaptureCommand::Start { port, snaplen, .. }) => {
            AdminRequest::CaptureStart { port, snaplen }
        }
        Command::Capture(CaptureCommand::Stop) => AdminRequest::CaptureStop,
    }
}

/// Checks the answer fits the question.
fn check_kind(req: &AdminRequest, answer: &AdminResponse) -> bool {
    matches!(
        (req, answer),
        (AdminRequest::Status, AdminResponse::Status(_))
            | (AdminRequest::Clients, AdminResponse::Clients(_))
            | (AdminRequest::Objects(_), AdminResponse::Objects(_))
            | (AdminRequest::Counters, AdminResponse::Counters(_))
            | (
                AdminRequest::DisconnectClient(_)
                    | AdminRequest::ResetQp { .. }
                    | AdminRequest::CaptureStart { .. }
                    | AdminRequest::CaptureStop,
                AdminResponse::Done(_)
            )
    )
}

fn run(cli: &Cli) -> Result<String, CtlError> {
    let label = cli.daemon_label();
    let mut session = AdminSession::open(
        &cli.socket_path(),
        &label,
        Duration::from_millis(cli.timeout_ms),
    )?;
    let req = request(&cli.command);
    if let Command::Counters(CounterArgs {
        watch: Some(secs),
        count,
    }) = cli.command
    {
        return watch(cli, &mut session, secs, count);
    }
    let answer = if let Command::Capture(CaptureCommand::Start { file, .. }) = &cli.command {
        // The file is ours (created with this user's rights), the daemon only writes
        // into the descriptor.
        let f = std::fs::File::create(file)
            .map_err(|e| CtlError::Usage(format!("cannot create {}: {e}", file.display())))?;
        session.admin_with_fd(req.clone(), std::os::fd::AsFd::as_fd(&f))?
    } else {
        session.admin(req.clone())?
    };
    if !check_kind(&req, &answer) {
        return Err(CtlError::Comm(format!(
            "{label} answered {req:?} with another kind of answer"
        )));
    }
    output(cli, answer)
}

/// The counters of the whole daemon (the summed set), read once.
fn read_counters(
    session: &mut AdminSession,
    label: &str,
) -> Result<Vec<iwarp_shm_socket::CounterSet>, CtlError> {
    match session.admin(AdminRequest::Counters)? {
        AdminResponse::Counters(c) => Ok(c),
        _ => Err(CtlError::Comm(format!(
            "{label} answered Counters with another kind of answer"
        ))),
    }
}

/// `counters --watch SECONDS [--count N]`: one reading every interval, printed as it
/// comes (what moved since the last reading, and its rate), like `iperf3`'s intervals.
fn watch(
    cli: &Cli,
    session: &mut AdminSession,
    secs: u32,
    count: Option<u32>,
) -> Result<String, CtlError> {
    use std::io::Write;
    let label = cli.daemon_label();
    let start = std::time::Instant::now();
    let mut prev = read_counters(session, &label)?;
    let mut prev_at = start;
    let mut done = 0u32;
    // Bounded by --count; without it the operator ends it (SIGINT).
    while count.is_none_or(|n| done < n) {
        std::thread::sleep(Duration::from_secs(u64::from(secs)));
        let cur = read_counters(session, &label)?;
        let now = std::time::Instant::now();
        let interval = render::Interval {
            since_start_s: now.duration_since(start).as_secs_f64(),
            length_s: now.duration_since(prev_at).as_secs_f64(),
        };
        let text = if cli.json {
            let mut s = serde_json::to_string(&render::counters_delta_json(&prev, &cur, interval))
                .unwrap_or_default();
            s.push('\n');
            s
        } else {
            render::counters_delta_text(&prev, &cur, interval)
        };
        let mut out = std::io::stdout().lock();
        // A closed stdout (a pager quit) ends the watch.
        if out
            .write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            break;
        }
        prev = cur;
        prev_at = now;
        done += 1;
    }
    Ok(String::new())
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            // --help and --version are not errors.
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(&cli) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("iwarpctl: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("iwarpctl").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn commands_map_to_admin_requests() {
        assert_eq!(request(&cli(&["status"]).command), AdminRequest::Status);
        assert_eq!(request(&cli(&["ports"]).command), AdminRequest::Status);
        assert_eq!(request(&cli(&["clients"]).command), AdminRequest::Clients);
        assert_eq!(
            request(&cli(&["qps", "--client", "3"]).command),
            AdminRequest::Objects(Some(3))
        );
        assert_eq!(request(&cli(&["cqs"]).command), AdminRequest::Objects(None));
        assert_eq!(request(&cli(&["counters"]).command), AdminRequest::Counters);
        assert_eq!(
            request(&cli(&["counters", "--watch", "1"]).command),
            AdminRequest::Counters
        );
        assert!(check_kind(
            &AdminRequest::Counters,
            &AdminResponse::Counters(vec![])
        ));
        assert!(!check_kind(
            &AdminRequest::Counters,
            &AdminResponse::Clients(vec![])
        ));
    }

    #[test]
    fn output_follows_the_format_flag() {
        let c = fixture::counters();
        let t = output(&cli(&["counters"]), AdminResponse::Counters(c.clone())).unwrap();
        assert!(t.starts_with("COUNTER"), "{t}");
        let j = output(&cli(&["counters", "--json"]), AdminResponse::Counters(c)).unwrap();
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["total"]["rx_frames"], 11);
        let q = output(
            &cli(&["cqs", "--json"]),
            AdminResponse::Objects(fixture::objects()),
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&q).unwrap();
        assert_eq!(v.as_array().unwrap().len(), 1);
        assert_eq!(v[0]["kind"], "cq");
    }
}
