"""Everything a person reads, above the run layer and below the CLI (docs/architecture.md):
console.py (a point's summary, the sweep's table), progress.py (the sweep's progress bar), sweep.py (the
sweep's other lines, its dry run and its report), config_view.py (`--cfg job` and `--info`), plan.py (the planner's tables), plan_json.py (a plan's JSON text),
preflight.py (the preflight table), calibrate.py (calibrate's lines and cluster file), style.py (the
figures' one style). Packages: report/ (the report), check/ (check's and ab's
outputs), history/ (the history page, table and plots).
"""
