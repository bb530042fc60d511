"""Drop-ins for other tools' entry points: Kernel Tuner's ``tune_kernel``/``run_kernel`` and Triton's
``autotune``.

They translate arguments into adaptune's objects and results back; nothing in the library imports them.
"""
