//! Whole-system tests of the shared-memory verbs: client processes on two iwarpd joined by memif
