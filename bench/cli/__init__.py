"""Layer 6, the command line: main.py (the `fsdp-bench` console script; invalid input is exit 2 and
a storage fault exit 1, decided there), options.py (options more than one command takes: the
overrides, `--cfg job`, `--info`), completion.py (shell completion of overrides),
pytest_plugin.py (the `fsdp_point` fixture), commands/ (one module per command, each parsing its
arguments and calling one function of the layers below).
"""
