//! Executing control commands on a core.

use iwarp_types::{Instant, Memory};

use crate::control::{AppBox, AppId, Command, ControlError, Done, Op, Reply};
use crate::core::{AppSlot, Core};

impl<M: Memory> Core<M> {
    /// Executes up to the per-iteration bound of queued commands.
    pub(crate) fn run_commands(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while n < self.cfg.commands_per_iteration {
            let Some(cmd) = self.control.pop_command() else {
                break;
            };
            n += 1;
            let id = cmd.id;
            let result = self.exec(now, cmd);
            self.loop_counters.commands += 1;
            // Room for the reply was checked before the command was taken.
            let _ = self.control.push_reply(Reply {
                id,
                core: self.cfg.index,
                result,
            });
        }
        n
    }

    /// One command.
    fn exec(&mut self, now: Instant, cmd: Command<M>) -> Result<Done<M>, ControlError> {
        match cmd.op {
            Op::Snapshot => {
                self.publish_with(now, true);
                Ok(Done::Ok)
            }
            Op::Shutdown { grace_ms } => {
                self.begin_shutdown(now, grace_ms);
                Ok(Done::Ok)
            }
            Op::StopApp(id) => self.stop_app(id).map(|app| Done::AppStopped(AppBox(app))),
            Op::StartApp(app) => self.start_app(cmd.port, app.0).map(Done::AppStarted),
        }
    }

    /// Starts an app bound to port `port` (its index on the core): what
    /// [`Op::StartApp`] does, for a caller that owns the core (tests, a core built on its
    /// own thread).
    pub fn start_app(
        &mut self,
        port: usize,
        app: Box<dyn crate::App<M> + Send>,
    ) -> Result<AppId, ControlError> {
        if port >= self.ports.len() {
            return Err(ControlError::NoSuchPort);
        }
        if self.shutdown.is_some() {
            return Err(ControlError::ShuttingDown);
        }
        let slot = self
            .apps
            .iter_mut()
            .find(|s| s.is_none())
            .ok_or(ControlError::AppTableFull)?;
        let id = AppId(self.next_app_id);
        self.next_app_id = self.next_app_id.wrapping_add(1);
        *slot = Some(AppSlot { id, port, app });
        Ok(id)
    }

    /// Stops an app without calling its `shutdown` and hands it back.
    fn stop_app(&mut self, id: AppId) -> Result<Box<dyn crate::App<M> + Send>, ControlError> {
        let slot = self
            .apps
            .iter_mut()
            .find(|s| s.as_ref().is_some_and(|s| s.id == id))
            .ok_or(ControlError::NoSuchApp)?;
        let s = slot.take().ok_or(ControlError::NoSuchApp)?;
        Ok(s.app)
    }
}
