"""fsdp-bench: scaling benchmarks for PyTorch FSDP2, in layers that import only downward
(docs/architecture.md, `.importlinter`): cli/ > the top-level `reports` package (what a person reads)
> run/ > analysis/ > config/ > schema/.
fsdp_core (its own package) runs inside each rank. __main__.py makes `python -m bench` the console script.
"""
