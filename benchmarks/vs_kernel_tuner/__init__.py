"""Study: see README.md."""
