"""The ``flagsight`` command (``main``): set-up, serving and pipeline runs in this process,
everyday admin work over a running service's admin API, and the demo's seed and traffic."""
