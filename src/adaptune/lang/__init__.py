"""Languages that generate variants for adaptune: nested data-parallel operators (ndp)."""
