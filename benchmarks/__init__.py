"""adaptune's studies: one package per question (``python -m benchmarks.<study>.run``).

See ``benchmarks/README.md`` for the table of studies; ``benchmarks/harness`` times and writes
for all of them.
"""
