"""Threshold tuning over multi-versioned code (Futhark's incremental flattening; seed 003)."""
