"""One module per `fsdp-bench` command, each with HELP, add_arguments(parser) and main(args) -> exit code:
run.py, preflight.py, sweep.py, report.py, check.py, baseline.py, ab.py, plan.py, calibrate.py,
cancel.py, store.py, history.py. No command imports another (shared options: bench/cli/options.py).
"""
