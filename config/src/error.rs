//! The one error type of the crate: which key of the file is wrong, and why.

use core::fmt;

/// A configuration key holds a value iwarpd cannot run with, or the file cannot be read.
///
/// `field` names the key as it is written in the file, with array indices:
/// `port[0].ipv4`, `cores.dataplane`, `tcp.rto_ms_min`. Errors that concern no single key
/// (the file cannot be read, its TOML syntax is broken) use the pseudo-field `file` or
/// the key nearest to the syntax error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The offending key, e.g. `port[0].ipv4`.
    pub field: String,
    /// What is wrong with it, in words an operator can act on.
    pub message: String,
    /// The 1-based line of the file the error points at, when it came from the file text.
    pub line: Option<usize>,
}

impl ConfigError {
    /// An error about `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            field: field.into(),
            message: message.into(),
            line: None,
        }
    }

    /// The same error, pointing at `line` of the file.
    pub fn at_line(mut self, line: usize) -> ConfigError {
        self.line = Some(line);
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "config error: {}: {}", self.field, self.message)?;
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// Returns `Err(ConfigError::new(field, message))` unless `ok`.
pub(crate) fn ensure(
    ok: bool,
    field: impl Into<String>,
    message: impl Into<String>,
) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::new(field, message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_field_and_line() {
        let e = ConfigError::new("port[0].ipv4", "must be a unicast host address");
        assert_eq!(
            e.to_string(),
            "config error: port[0].ipv4: must be a unicast host address"
        );
        assert_eq!(
            e.at_line(7).to_string(),
            "config error: port[0].ipv4: must be a unicast host address (line 7)"
        );
        assert!(ensure(true, "x", "y").is_ok());
        assert_eq!(ensure(false, "x", "y").unwrap_err().field, "x");
    }
}
