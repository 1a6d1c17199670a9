"""Layer 2, composing points: registry.py (sweeps/ plus the user's config folders), compose.py
(overrides -> configs and validated RunSpecs, grids), groups.py (Hydra's composes of group choices,
as few as a grid allows), validate.py (a config -> RunSpec; a grid's sections validated once),
rules.py (what a new point must meet), paths.py (every path a user gives, checked before anything
launches), toplevel.py (the sweep command's own keys: results_dir, report), problems.py (one line
per problem, exit 2, and the closest allowed word), catalog.py (what a command line may say, for
--help and completion), version.py (the harness version).
"""
