//! The per-core shared-memory verbs service: an App that serves client rings (SQ, RQ, SRQ, CQ) and does the engine calls the control thread asks for
