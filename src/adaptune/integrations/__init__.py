"""Drop-ins for other tuning libraries: each translates arguments and results, nothing in the core imports them."""
